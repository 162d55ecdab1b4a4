"""The API's documentation works offline: the OpenAPI UI loads only vendored files (no CDN), and
the document declares the workspace API key as the bearer scheme of every operation."""

from __future__ import annotations

import re

import httpx


async def test_the_schema_pages_load_only_vendored_files(client: httpx.AsyncClient) -> None:
    for path in ("/schema", "/schema/swagger"):
        page = await client.get(path)
        assert page.status_code == 200
        urls = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', page.text)
        assert urls, path
        assert all(u.startswith("/static/vendor/swagger-ui/") for u in urls), urls
        for url in urls:
            assert (await client.get(url)).status_code == 200, url


async def test_the_document_declares_the_api_key_scheme(client: httpx.AsyncClient) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    scheme = document["components"]["securitySchemes"]["ApiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert any(p.startswith("/api/v1/") for p in document["paths"])
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            # The API needs the key; the probes answer anyone (the route enumeration test).
            expected: list[dict[str, list[str]]] | None = (
                [{"ApiKey": []}] if path.startswith("/api/") else None
            )
            assert operation.get("security") == expected, (method, path)
