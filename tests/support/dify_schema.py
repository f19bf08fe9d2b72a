"""The rules Dify's custom-tool importer applies to an OpenAPI schema, as a checker for tests.

Read from Dify's importer (``ApiBasedToolSchemaParser.parse_openapi_to_tool_bundle``) and its
tool runner: it takes ``servers[0].url``; names each tool by ``operationId``; turns query,
path and header parameters and each top-level property of a JSON body into a tool input,
resolving the body's ``$ref`` one level only; types an input only from a plain ``type`` of
string, number/integer or boolean (``anyOf``, a nested ``$ref`` or a missing type become a
string input); and takes authentication from its own settings, so a key must be a security
scheme, never a parameter. It passes an ``array`` property's JSON text through ``json.loads``,
which is how ``/memories/batch`` gets its list.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["ARRAY_INPUTS", "PLAIN_TYPES", "dify_problems", "dify_tools"]

PLAIN_TYPES = {"string", "number", "integer", "boolean"}
ARRAY_INPUTS = {("add_memories", "memories")}
"""Body properties that are arrays on purpose (Dify sends them as JSON text)."""
OPERATION_ID = re.compile(r"^[a-zA-Z0-9_-]{1,32}$")
KEY_NAMES = {"authorization", "x-api-key", "api_key", "apikey", "key", "token"}
METHODS = ("get", "post", "put", "delete", "patch")


def dify_tools(schema: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The tools Dify would make: operationId -> {input name: input type}."""
    tools: dict[str, dict[str, str]] = {}
    for item in schema["paths"].values():
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            inputs = {p["name"]: p.get("schema", {}).get("type", "string")
                      for p in op.get("parameters", [])}
            for name, prop in _body_properties(schema, op).items():
                inputs[name] = prop.get("type", "string")
            tools[op.get("operationId", "")] = inputs
    return tools


def dify_problems(schema: dict[str, Any]) -> list[str]:
    """Everything in a schema that Dify's importer would reject or read wrongly (empty: none)."""
    problems = []
    servers = schema.get("servers") or []
    if not servers or not str(servers[0].get("url", "")).startswith(("http://", "https://")):
        problems.append("servers[0].url: missing or not an http(s) URL")
    schemes = schema.get("components", {}).get("securitySchemes", {})
    if not any(s.get("type") == "http" and s.get("scheme") == "bearer" or
               s.get("type") == "apiKey" and s.get("in") == "header" for s in schemes.values()):
        problems.append("components.securitySchemes: no bearer or API-key header scheme")
    seen: set[str] = set()
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                problems += _operation_problems(schema, f"{method.upper()} {path}",
                                                item[method], seen)
    return problems


def _operation_problems(schema: dict[str, Any], where: str, op: dict[str, Any],
                        seen: set[str]) -> list[str]:
    problems = []
    op_id = op.get("operationId", "")
    if not OPERATION_ID.match(op_id):
        problems.append(f"{where}: operationId {op_id!r} is missing or not short")
    if op_id in seen:
        problems.append(f"{where}: operationId {op_id!r} repeated")
    seen.add(op_id)
    if not (op.get("description") or op.get("summary")):
        problems.append(f"{where}: no description for the model")
    for p in op.get("parameters", []):
        if p["name"].lower() in KEY_NAMES:
            problems.append(f"{where}: parameter {p['name']!r} looks like auth; use a scheme")
        if p.get("schema", {}).get("type") not in PLAIN_TYPES:
            problems.append(f"{where}: parameter {p['name']!r} is not a plain type")
    body = op.get("requestBody", {}).get("content", {})
    if body and "application/json" not in body:
        problems.append(f"{where}: body is not JSON")
    for name, prop in _body_properties(schema, op).items():
        if name.lower() in KEY_NAMES:
            problems.append(f"{where}: body property {name!r} looks like auth; use a scheme")
        if "anyOf" in prop or "oneOf" in prop or "$ref" in prop:
            problems.append(f"{where}: body property {name!r} uses anyOf/oneOf/$ref")
        elif (op_id, name) in ARRAY_INPUTS:
            if prop.get("type") != "array":
                problems.append(f"{where}: body property {name!r} should be an array")
        elif prop.get("type") not in PLAIN_TYPES:
            problems.append(f"{where}: body property {name!r} is not string/number/boolean")
    return problems


def _body_properties(schema: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    content = op.get("requestBody", {}).get("content", {}).get("application/json")
    if not content or "schema" not in content:
        return {}
    body = content["schema"]
    if "$ref" in body:  # one level, as Dify resolves it
        node: Any = schema
        for part in body["$ref"].split("/")[1:]:
            node = node[part]
        body = node
    return body.get("properties", {})
