"""The REST API (`/api/v1/`): one module per resource, each view beside its serializers, all over
the same query layer and workflows as the pages (DRF only at the edge)."""
