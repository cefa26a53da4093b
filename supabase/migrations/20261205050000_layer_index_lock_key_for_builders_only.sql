-- The layer-index lock's key is for the database owner and pg_cron, who build indexes: like the
-- decision's other functions, no role of the Data API executes it (the schema rules' tests found it
-- executable by PUBLIC, as every new function is).
revoke execute on function roi.layer_index_lock_key() from public;
