"""`make audit`: known vulnerabilities of every pinned dependency, Python (pip-audit on constraints.txt) and npm
(npm audit on the test tools the Makefile installs), less the exceptions written down in audit-exceptions.txt.

Exit status: 0 clean (or every finding excepted), 1 a vulnerability, 2 a dependency that could not be checked
(the vulnerability service unreachable, or it does not know the package): an audit that checked nothing is not
reported as clean.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def exceptions(path: Path) -> dict[str, str]:
    """`ID  # reason` per line: every exception says why it is one."""
    found = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        ident, _, reason = line.partition("#")
        if not reason.strip():
            raise SystemExit(f"{path.name}:{number}: {ident.strip()} has no reason (write it after '#')")
        found[ident.strip()] = reason.strip()
    return found


def python_audit(constraints: Path, ignored: dict[str, str]) -> tuple[list[str], list[str]]:
    """(vulnerabilities, dependencies not checked) of the pinned Python packages."""
    # A local version label (torch's +cpu) names a build of the same release, which is what advisories name.
    pins = re.sub(r"^([A-Za-z0-9_.-]+==[^+\s]+)\+\S+", r"\1", constraints.read_text(), flags=re.M)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as requirements:
        requirements.write(pins)
        requirements.flush()
        command = [sys.executable, "-m", "pip_audit", "--requirement", requirements.name, "--no-deps",
                   "--disable-pip", "--progress-spinner", "off", "--format", "json"]
        command += [arg for ident in ignored for arg in ("--ignore-vuln", ident)]
        result = subprocess.run(command, capture_output=True, text=True)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [], [f"pip-audit failed: {(result.stderr or result.stdout).strip()[-500:]}"]
    vulnerable, unchecked = [], []
    for dependency in report["dependencies"]:
        if "skip_reason" in dependency:
            unchecked.append(f"{dependency['name']}: {dependency['skip_reason']}")
        for vuln in dependency.get("vulns", []):
            fixed = ", ".join(vuln.get("fix_versions", [])) or "no fixed version"
            vulnerable.append(f"{dependency['name']} {dependency['version']}: {vuln['id']} "
                              f"({', '.join(vuln.get('aliases', []))}; fixed in {fixed})")
    return vulnerable, unchecked


def npm_audit(prefix: Path, ignored: dict[str, str]) -> tuple[list[str], list[str]]:
    if not (prefix / "package-lock.json").exists():
        return [], [f"{prefix}: no package-lock.json (run `make setup` first)"]
    result = subprocess.run(["npm", "audit", "--json", "--prefix", str(prefix)], capture_output=True, text=True)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return [], [f"npm audit failed: {result.stderr.strip()[-500:]}"]
    if "error" in report or "message" in report:
        message = report.get("message") or report["error"].get("summary") or report["error"]
        return [], [f"npm audit could not reach its advisory service: {message}"]
    vulnerable = []
    for name, found in report.get("vulnerabilities", {}).items():
        sources = [v.get("url", "") for v in found.get("via", []) if isinstance(v, dict)]
        if sources and all(any(ident in url for ident in ignored) for url in sources):
            continue
        vulnerable.append(f"{name} ({found.get('severity')}): {', '.join(sources) or found.get('via')}")
    return vulnerable, []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--constraints", type=Path, default=ROOT / "constraints.txt")
    parser.add_argument("--exceptions", type=Path, default=ROOT / "audit-exceptions.txt")
    parser.add_argument("--npm-prefix", type=Path, default=ROOT / ".cache/npm")
    args = parser.parse_args()
    ignored = exceptions(args.exceptions)
    for ident, reason in ignored.items():
        print(f"excepted {ident}: {reason}")  # noqa: T201 - the report
    any_vulnerable = any_unchecked = False
    for name, (vulnerable, unchecked) in (("Python (constraints.txt)", python_audit(args.constraints, ignored)),
                                          ("npm (.cache/npm)", npm_audit(args.npm_prefix, ignored))):
        print(f"{name}: {len(vulnerable)} known vulnerabilities, {len(unchecked)} dependencies not checked")  # noqa: T201
        for line in vulnerable:
            print(f"  VULNERABLE {line}")  # noqa: T201
        for line in unchecked[:10]:
            print(f"  NOT CHECKED {line}")  # noqa: T201
        if len(unchecked) > 10:
            print(f"  ... and {len(unchecked) - 10} more not checked")  # noqa: T201
        any_vulnerable, any_unchecked = any_vulnerable or bool(vulnerable), any_unchecked or bool(unchecked)
    if any_unchecked:
        print("The audit is incomplete: the vulnerability services (PyPI's JSON API per release, npm's advisory "  # noqa: T201
              "endpoint) could not be asked about every dependency. Run it where they are reachable.")
    return 1 if any_vulnerable else 2 if any_unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
