"""The database: one function per statement in ``sql/``, connections, the schema, the producer API, recurring jobs' rows. psycopg stays inside this layer and those above it."""
