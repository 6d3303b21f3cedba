"""Print the requirements of the project's core and of the named extras, one per line, from pyproject.toml.

The images install these (pinned by constraints.txt) in a layer of their own, before the source is copied, so a
code change rebuilds only the small source layer: `python requirements.py backend embedding > requirements.txt`.
"""

import sys
import tomllib

with open("pyproject.toml", "rb") as file:
    project = tomllib.load(file)["project"]
extras = project.get("optional-dependencies", {})
unknown = [name for name in sys.argv[1:] if name not in extras]
if unknown:
    sys.exit(f"unknown extras: {', '.join(unknown)} (pyproject.toml has {', '.join(extras)})")
requirements = list(project["dependencies"])
for name in sys.argv[1:]:
    requirements += [r for r in extras[name] if r not in requirements]
print("\n".join(requirements))  # noqa: T201 - the script's output
