"""The PostgreSQL store: many agents on one server (`postgres_store.PostgresStore`), its
schema (`postgres_schema`) and its lease row (`postgres_lease`). psycopg 3 (the
`postgres` extra) is imported only when a DSN is opened."""
