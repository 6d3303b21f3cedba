"""docs/settings.md is rendered from the settings classes (scripts/settings_reference.py, `make settings-docs`): a
setting added, renamed or described anew must come with the page. Rendered in-process: the classes are imported,
nothing is started and no model is read."""

from __future__ import annotations

import importlib.util
import sys

from tests.support.servers import ROOT


def renderer():
    """scripts/settings_reference.py as a module (scripts/ is no package)."""
    if "settings_reference" not in sys.modules:
        spec = importlib.util.spec_from_file_location("settings_reference", ROOT / "scripts/settings_reference.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclass looks its module up while the module is being executed
        spec.loader.exec_module(module)
    return sys.modules["settings_reference"]


def test_the_settings_page_is_the_classes_rendering():
    committed = (ROOT / "docs/settings.md").read_text()
    assert renderer().render() == committed, \
        "docs/settings.md differs from the settings classes: run `make settings-docs`"


def test_every_setting_is_on_the_page_with_its_environment_names():
    module = renderer()
    page = (ROOT / "docs/settings.md").read_text()
    for reference in {module.SHARED, *(service.settings for service in module.SERVICES)}:
        cls = module.load(reference)
        for name, field in cls.model_fields.items():
            assert f"`{name}`" in page, f"{cls.__name__}.{name} is not on docs/settings.md"
            for variable in module.environment(cls, name, field):
                assert f"`{variable}`" in page, f"{variable} ({cls.__name__}.{name}) is not on docs/settings.md"
