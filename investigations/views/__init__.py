"""The server-rendered pages, one module per page family, and what only they use (charts, palette,
the precision of a log's times). HTMX asks the same view for a named partial of the same template."""
