"""zm-roi: the memory ROI benchmark. Most of it is SQL, defined in supabase/schemas (and deployed by
the history in supabase/migrations); this package makes the model calls, serves the MCP tool, renders
the dashboard and drives the local database."""

__version__ = "0.1.0"
