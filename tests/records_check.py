"""Reading back the standard run records with the real tools: the
``roc-validator`` (RO-Crate, offline from the contexts shipped in
tests/data/ro-crate/) and the ``prov`` library (PROV-JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CONTEXTS = Path(__file__).resolve().parent / "data" / "ro-crate"
# What a Process Run Crate 0.5 (RO-Crate 1.1) names in its @context.
CONTEXT_FILES = {
    "https://w3id.org/ro/crate/1.1/context": "ctx-1.1.jsonld",
    "https://w3id.org/ro/terms/workflow-run/context": "ctx-wfrun.jsonld",
}


def make_offline_cache(out: Path) -> None:
    """A requests_cache file (``out`` + ``.sqlite``) answering the
    validator's requests for the contexts from the local copies."""
    import io

    from requests.adapters import HTTPAdapter
    from requests_cache import CachedSession
    from urllib3 import HTTPResponse

    class Local(HTTPAdapter):
        def send(self, request: Any, **kw: Any) -> Any:
            body = (CONTEXTS / CONTEXT_FILES[request.url]).read_bytes()
            raw = HTTPResponse(body=io.BytesIO(body), status=200, preload_content=False,
                               headers={"Content-Type": "application/ld+json"},
                               request_url=request.url)  # fmt: skip
            return self.build_response(request, raw)

    session = CachedSession(cache_name=str(out), backend="sqlite", expire_after=-1,
                            allowable_methods=("GET",), allowable_codes=(200,))  # fmt: skip
    session.mount("https://w3id.org/", Local())
    for url in CONTEXT_FILES:
        for headers in ({}, {"Accept": "application/ld+json, application/json"}):
            got = session.get(url, headers=headers)
            assert got.status_code == 200 and "@context" in got.json(), url
    session.close()


def validate_crate(crate: Path, work: Path, level: str = "required") -> dict[str, Any]:
    """The validator's JSON report for ``crate`` against the Process Run
    Crate profile at ``level``; a fresh offline cache each time (the
    validator rewrites its cache)."""
    cache = work / "roc-cache"
    make_offline_cache(cache)
    report = work / f"roc-report-{level}.json"
    exe = Path(sys.executable).with_name("rocrate-validator")
    run = subprocess.run(
        [str(exe), "validate", "-p", "process-run-crate", "-l", level, "--no-paging",
         "--offline", "--cache-path", str(cache), "--output-format", "json",
         "--output-file", str(report), str(crate)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert report.exists(), run.stdout + run.stderr
    result = json.loads(report.read_text())
    result["returncode"] = run.returncode
    return result


def issues(report: dict[str, Any], severity: str = "REQUIRED") -> list[str]:
    return [
        f"{i['message']} ({i.get('violatingEntity')})"
        for i in report["issues"]
        if i["severity"] == severity
    ]


def read_prov(path: Path) -> Any:
    """The PROV-JSON file as a ``prov`` ProvDocument."""
    from prov.model import ProvDocument

    return ProvDocument.deserialize(source=str(path), format="json")
