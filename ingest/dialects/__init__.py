"""Statement rules per database dialect (pure Python, no Django); MySQL's are in ingest/sql."""
