"""Django's PostgreSQL backend, with a pool check that clears dead connections at once
(``agentops.dbpool``) and psycopg's C loader for ``timestamptz`` values."""
