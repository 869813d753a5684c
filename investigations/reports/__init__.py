"""Case reports: the case's evidence as PDF, CSV or JSON, written under REPORT_DIR and hashed.

`content` gathers what every format shows (read in chunks, never the whole case at once);
one module per format writes it; `generate` runs a report from request to stored SHA-256.
"""
