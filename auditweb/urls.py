from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from investigations.roles import Role, role_permission

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path(
        "api/schema/",
        SpectacularAPIView.as_view(permission_classes=[role_permission(Role.VIEWER)]),
        name="schema",
    ),
    # The browsable docs: Swagger UI (served by AuditWeb, static/vendor.sh) over the schema above.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="schema", permission_classes=[role_permission(Role.VIEWER)]
        ),
        name="api-docs",
    ),
    path("api/v1/", include("investigations.api.urls")),
    path("", include("investigations.urls")),
]

handler404 = "investigations.api.schema.not_found"  # JSON under /api/
