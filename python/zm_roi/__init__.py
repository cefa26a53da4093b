"""zm-roi: the memory ROI benchmark. Most of it is SQL in supabase/migrations; this package makes
the model calls, serves the MCP tool, renders the dashboard and drives the local database."""

__version__ = "0.1.0"
