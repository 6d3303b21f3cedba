"""The settings every service shares (settings.py), read as compose, Kubernetes and users give them: lists as
comma-separated text, OpenVINO properties as JSON text (an unset variable as nothing), the API key as SERVICE_API_KEY,
bounds that refuse a value before the service starts, and names that match whatever their case."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ovgenai_common.settings import MAX_JSON_BYTES, JsonObject, MiB, NameList, ServiceSettings


class Settings(ServiceSettings):
    properties: JsonObject = {}
    names: NameList = []


def test_a_list_is_comma_separated_text_in_the_environment(monkeypatch):
    monkeypatch.setenv("ALLOWED_HOSTS", " chat.example.com, *.corp.example ,,")
    assert ServiceSettings().allowed_hosts == ["chat.example.com", "*.corp.example"]
    monkeypatch.setenv("NAMES", "")
    assert Settings().names == []
    assert Settings(names=["a", "b"]).names == ["a", "b"]  # given as a list in code: kept as it is


@pytest.mark.parametrize(("text", "expected"), [
    ("", {}),  # compose's ${VAR:-} for a variable the user left unset
    ("  ", {}),
    ('{"NUM_STREAMS": 1, "CACHE_DIR": "/cache"}', {"NUM_STREAMS": 1, "CACHE_DIR": "/cache"}),
])
def test_json_objects_are_json_text_and_nothing_is_empty(monkeypatch, text, expected):
    monkeypatch.setenv("PROPERTIES", text)
    assert Settings().properties == expected


@pytest.mark.parametrize("text", ["{NUM_STREAMS: 1}", "[1, 2]", '"text"'])
def test_json_that_is_not_an_object_is_refused_at_start(monkeypatch, text):
    monkeypatch.setenv("PROPERTIES", text)
    with pytest.raises(ValidationError, match="properties"):
        Settings()


def test_the_api_key_from_service_api_key_or_given(monkeypatch):
    monkeypatch.setenv("SERVICE_API_KEY", "from-env")
    assert ServiceSettings().api_key == "from-env"
    assert ServiceSettings(api_key="given").api_key == "given"


def test_names_match_whatever_their_case_and_unknown_ones_are_ignored(monkeypatch):
    monkeypatch.setenv("log_level", "debug")
    monkeypatch.setenv("MAX_JSON_DEPTH", "32")
    monkeypatch.setenv("SOME_OTHER_SERVICES_SETTING", "x")
    settings = ServiceSettings()
    assert (settings.log_level, settings.max_json_depth) == ("debug", 32)


def test_the_body_limits_default_to_four_mib_and_refuse_what_could_not_work():
    settings = ServiceSettings()
    assert settings.max_request_bytes == settings.max_json_bytes == MAX_JSON_BYTES == 4 * MiB
    for bad in ({"max_json_depth": 0}, {"max_json_depth": 257}, {"max_request_bytes": 512}, {"port": 70000},
                {"body_timeout": 0}, {"log_format": "xml"}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            ServiceSettings(**bad)


@pytest.mark.parametrize(("text", "expected"), [
    ("http://localhost:5173, HTTPS://UI.Example.com/", ["http://localhost:5173", "https://ui.example.com"]),
    ('["http://localhost:5173"]', ["http://localhost:5173"]),  # vLLM's --allowed-origins takes a JSON array
    ("", []),
])
def test_allowed_origins_are_read_as_browsers_send_them(monkeypatch, text, expected):
    monkeypatch.setenv("ALLOWED_ORIGINS", text)
    assert ServiceSettings().allowed_origins == expected


@pytest.mark.parametrize("origin", ["localhost:5173", "http://ui.example/app", "ui.example", "http://ui.example?x=1"])
def test_what_is_not_an_origin_is_refused_at_start(origin):
    with pytest.raises(ValidationError, match="is not an origin"):
        ServiceSettings(allowed_origins=origin)


def test_any_origin_needs_an_api_key():
    """Without a key, '*' would let every site the user visits use the service through the browser."""
    with pytest.raises(ValidationError, match="set an API key"):
        ServiceSettings(allowed_origins="*")
    assert ServiceSettings(allowed_origins="*", api_key="k").allowed_origins == ["*"]


@pytest.mark.parametrize(("env", "level"), [
    ({"LOGFLAG": "true"}, "debug"), ({"LOGFLAG": "False"}, "info"), ({"LOGFLAG": "true", "LOG_LEVEL": "warning"},
                                                                     "warning")])
def test_opeas_logflag_is_a_boolean_and_log_level_wins(monkeypatch, env, level):
    """OPEA reads LOGFLAG with os.getenv(..., False), so its string "False" logs at debug: here false is false."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert ServiceSettings().log_level == level
