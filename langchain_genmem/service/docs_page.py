"""The service's ``/docs`` page: FastAPI's Swagger UI, readable without internet access too.

Swagger UI loads its script and style from a CDN, which a server or a browser without
internet access cannot reach. So the page also carries a plain listing of the endpoints, made
here from the OpenAPI schema (each operation, whether it needs a key, its parameters and body
fields), inside the element Swagger UI fills: once its script has loaded, Swagger UI replaces
the listing with its own interactive page; without it, the listing stays. The schema itself
is served at ``/openapi.json``.
"""

from __future__ import annotations

from html import escape
from typing import Any

from langchain_genmem.core.extras import require_extra

require_extra("fastapi", "service", "genmem serve")

from fastapi.openapi.docs import get_swagger_ui_html  # noqa: E402
from starlette.responses import HTMLResponse  # noqa: E402

SWAGGER_ROOT = '<div id="swagger-ui">'
"""The element Swagger UI fills; the listing goes inside it."""
_METHODS = ("get", "post", "put", "patch", "delete")


def docs_page(schema: dict[str, Any], *, openapi_url: str, title: str) -> HTMLResponse:
    """Swagger UI for a schema, with the plain listing of its endpoints inside.

    Args:
        schema: the app's OpenAPI schema.
        openapi_url: where the page's script fetches the schema.
        title: the page's title.

    Returns:
        The page.
    """
    page = get_swagger_ui_html(openapi_url=openapi_url, title=title)
    listing = endpoint_listing(schema, openapi_url=openapi_url)
    body = bytes(page.body).decode("utf-8").replace(SWAGGER_ROOT, SWAGGER_ROOT + listing, 1)
    return HTMLResponse(body)


def endpoint_listing(schema: dict[str, Any], *, openapi_url: str) -> str:
    """Every operation of a schema as plain HTML (no script, no style sheet).

    Args:
        schema: an OpenAPI schema.
        openapi_url: where the schema is served, linked from the text.

    Returns:
        The HTML.
    """
    info = schema.get("info", {})
    parts = [
        f"<h1>{escape(info.get('title', ''))} {escape(str(info.get('version', '')))}</h1>",
        f"<p>{escape(info.get('description', ''))}</p>",
        "<p>This is the plain listing of the endpoints; the interactive page needs Swagger "
        "UI's script from the internet. Endpoints marked <em>needs a key</em> take "
        "<code>Authorization: Bearer KEY</code> or <code>X-API-Key: KEY</code>. The OpenAPI "
        f'schema: <a href="{escape(openapi_url)}">{escape(openapi_url)}</a>.</p>',
    ]
    for path, item in schema.get("paths", {}).items():
        for method in _METHODS:
            if method in item:
                parts.append(_operation(schema, method, path, item[method]))
    return "\n".join(parts)


def _operation(schema: dict[str, Any], method: str, path: str, op: dict[str, Any]) -> str:
    key = "needs a key" if op.get("security") else "no key needed"
    head = (f"<h2><code>{method.upper()} {escape(path)}</code> "
            f"({escape(op.get('operationId', ''))}, {key})</h2>")
    text = f"<p>{escape(op.get('description') or op.get('summary') or '')}</p>"
    rows = [_row(p["name"], p.get("schema", {}), p.get("required", False))
            for p in op.get("parameters", [])]
    body = _body(schema, op)
    required = set(body.get("required", []))
    rows += [_row(name, prop, name in required)
             for name, prop in body.get("properties", {}).items()]
    if not rows:
        return head + text
    table = ("<table><tr><th>field</th><th>type</th><th>required</th><th>what</th></tr>"
             + "".join(rows) + "</table>")
    return head + text + table


def _row(name: str, prop: dict[str, Any], required: bool) -> str:
    kind = prop.get("type", "object")
    if "enum" in prop:
        kind += ": " + ", ".join(str(v) for v in prop["enum"])
    return (f"<tr><td><code>{escape(name)}</code></td><td>{escape(kind)}</td>"
            f"<td>{'yes' if required else 'no'}</td>"
            f"<td>{escape(prop.get('description', ''))}</td></tr>")


def _body(schema: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    content = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    body = content.get("schema", {})
    ref = body.get("$ref", "")
    if ref.startswith("#/"):
        node: Any = schema
        for part in ref[2:].split("/"):
            node = node.get(part, {})
        body = node
    return body
