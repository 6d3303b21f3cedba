"""OVMS's and vLLM's command lines, typed as their guides type them, become the backend's settings; a flag that
cannot be honoured is refused with its name, one that means nothing here is accepted with a line saying so, and an
unknown one is refused as vLLM's own command line refuses it."""

from __future__ import annotations

import pytest
from pydantic_settings import CliApp

from ovgenai_server import app as backend_app
from ovgenai_server.__main__ import main
from ovgenai_server.cli import CLIError, boolean_settings, translate
from ovgenai_server.settings import BackendSettings

BOOLEANS = boolean_settings(BackendSettings)


def settings(*argv: str) -> BackendSettings:
    return CliApp.run(BackendSettings, cli_args=translate(argv, BOOLEANS))


def test_the_ovms_docker_line():
    # docker run openvino/model_server --rest_port 8000 --config_path /workspace/config.json
    s = settings("--rest_port", "8000", "--config_path", "/workspace/config.json")
    assert (s.port, s.model) == (8000, "/workspace/config.json")


def test_ovms_single_model_and_text_generation_options():
    s = settings("--model_path", "/models/llm", "--model_name", "llm", "--rest_port", "8001", "--rest_bind_address",
                 "0.0.0.0", "--target_device", "GPU", "--task", "text_generation", "--cache_size", "4",
                 "--max_num_seqs", "64", "--enable_prefix_caching", "false", "--dynamic_split_fuse", "true",
                 "--max_num_batched_tokens", "1024", "--kv_cache_precision", "u8", "--pipeline_type", "LM_CB")
    assert (s.model, s.served_model_name, s.port, s.host, s.device) == ("/models/llm", "llm", 8001, "0.0.0.0", "GPU")
    assert (s.cache_size, s.max_num_seqs, s.enable_prefix_caching, s.dynamic_split_fuse) == (4, 64, False, True)
    assert (s.max_num_batched_tokens, s.kv_cache_precision) == (1024, "u8")


def test_the_vllm_serve_line():
    s = settings("serve", "/models/llm", "--served-model-name", "llm", "--host", "127.0.0.1", "--port", "8002",
                 "--max-num-batched-tokens", "256", "--enable-prefix-caching", "--max-model-len", "2048",
                 "--api-key", "k", "--dtype", "bfloat16", "--trust-remote-code", "--tensor-parallel-size", "1")
    assert (s.model, s.served_model_name, s.host, s.port, s.api_key) == ("/models/llm", "llm", "127.0.0.1", 8002, "k")
    assert (s.max_num_batched_tokens, s.enable_prefix_caching, s.max_tokens_limit) == (256, True, 2048)
    assert s.inference_precision == "bf16"


@pytest.mark.parametrize(("flag", "expected"), [
    ("--no-enable-prefix-caching", False), ("--enable-prefix-caching", True), ("--enable_prefix_caching=false", False),
])
def test_switches_with_and_without_values_and_their_no_forms(flag, expected):
    assert settings("--model", "m", flag).enable_prefix_caching is expected


def test_chunked_prefill_is_split_fuse():
    assert settings("--no-enable-chunked-prefill").dynamic_split_fuse is False


def test_ovms_api_key_file(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\nignored\n")
    assert settings("--api_key_file", str(key)).api_key == "s3cret"
    with pytest.raises(CLIError, match="api_key_file"):
        translate(["--api_key_file", str(tmp_path / "missing")], BOOLEANS)


@pytest.mark.parametrize(("argv", "named"), [
    (["--port", "9000", "--rest_port", "8000"], "--port"),
    (["--task", "embeddings"], "--task embeddings"),
    (["--pipeline_type", "VLM_CB"], "--pipeline_type"),
    (["--speculative-config", '{"method": "eagle", "model": "m"}'], "method 'eagle'"),
    (["--speculative-config", '{"model": "m", "disable_padded_drafter_batch": true}'], "disable_padded_drafter_batch"),
    (["--tensor-parallel-size", "2"], "--tensor_parallel_size 2"),
    (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype fp8"),
    (["--dtype", "int8"], "--dtype int8"),
    (["--served-model-name", "a", "b"], "--served-model-name"),
    (["--max-num-seqs"], "--max-num-seqs"),
])
def test_what_cannot_be_honoured_is_refused_by_name(argv, named):
    with pytest.raises(CLIError) as refused:
        translate(argv, BOOLEANS)
    assert named in str(refused.value)


def test_an_unknown_flag_is_said_as_vllm_says_it_naming_it_as_typed(capsys):
    """It was a generic "unrecognized arguments" with the flag renamed (--no_such_flag)."""
    with pytest.raises(SystemExit) as exited:
        main(["serve", "/models/m", "--no-such-flag", "1", "--max-num-seqs", "4"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "error: unrecognized arguments: --no-such-flag" in err and "no_such" not in err


def test_flags_that_mean_nothing_here_are_accepted_with_one_line_saying_why(capsys, monkeypatch):
    """OPEA's own vLLM chart passes --enforce-eager: it printed "needs a value"."""
    served = []
    monkeypatch.setattr(backend_app, "serve", served.append)
    main(["serve", "/models/m", "--enforce-eager", "--gpu-memory-utilization", "0.9", "--swap-space", "4"])
    err = capsys.readouterr().err
    assert "warning: --enforce-eager has no effect here: the OpenVINO engine compiles its model once" in err
    assert "warning: --gpu-memory-utilization has no effect here" in err and "--swap-space" in err
    assert served[0].model == "/models/m"


def test_version_prints_the_version(capsys):
    main(["--version"])
    assert capsys.readouterr().out.startswith("ovgenai_server ")


def test_the_flags_that_mean_something_are_honoured():
    s = settings("serve", "/m", "--chat-template", "{{ messages[0]['content'] }}", "--seed", "7",
                 "--otlp-traces-endpoint", "http://collector:4318", "--ssl-keyfile", "k.pem", "--ssl-certfile", "c.pem",
                 "--api-key", "s3cret")
    assert (s.chat_template, s.seed, s.otel_exporter_otlp_endpoint) == ("{{ messages[0]['content'] }}", 7,
                                                                       "http://collector:4318")
    assert (s.ssl_keyfile, s.ssl_certfile, s.api_key) == ("k.pem", "c.pem", "s3cret")


def test_the_ovms_pull_and_serve_line():
    # ovms --rest_port 8000 --source_model OpenVINO/Phi-3.5-mini-instruct-int4-ov --model_repository_path models
    s = settings("--rest_port", "8000", "--source_model", "OpenVINO/Phi-3.5-mini-instruct-int4-ov",
                 "--model_repository_path", "models", "--task", "text_generation", "--target_device", "CPU")
    assert (s.port, s.source_model, str(s.model_repository_path)) == (
        8000, "OpenVINO/Phi-3.5-mini-instruct-int4-ov", "models")
    assert settings("--pull", "--source_model", "o/m", "--model_repository_path", "models").pull is True


def test_the_parsers_and_cache_eviction_as_ovms_and_vllm_type_them():
    s = settings("serve", "/models/qwen3", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
                 "--reasoning-parser", "qwen3",
                 "--cache_eviction_config", '{"start_size": 32, "recent_size": 128, "max_cache_size": 672}')
    assert (s.tool_parser, s.reasoning_parser) == ("hermes", "qwen3")
    assert s.cache_eviction_config.max_cache_size == 672
    ovms = settings("--model_path", "/models/qwen3", "--tool_parser", "hermes3")
    assert ovms.tool_parser == "hermes3"


def test_help_is_the_settings_own_whatever_else_was_typed():
    assert translate(["--help"], ()) == ["--help"]
    assert translate(["serve", "m", "-h", "--port"], ()) == ["--help"]


@pytest.mark.parametrize(("argv", "expected"), [
    (["--draft_source_model", "/models/draft"], {"draft_model": "/models/draft"}),  # OVMS
    (["--speculative-config", '{"model": "/d", "num_speculative_tokens": 3}'],  # vLLM
     {"draft_model": "/d", "num_speculative_tokens": 3}),
    (["--speculative-model", "/d", "--num-speculative-tokens", "2"],
     {"draft_model": "/d", "num_speculative_tokens": 2}),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4}'],  # vLLM's n-gram: prompt lookup
     {"prompt_lookup": True, "num_speculative_tokens": 4}),
])
def test_a_draft_model_as_ovms_and_vllm_name_it(argv, expected):
    chosen = settings(*argv)
    assert {name: getattr(chosen, name) if name != "draft_model" else str(chosen.draft_model)
            for name in expected} == expected


@pytest.mark.parametrize(("argv", "expected"), [
    (["serve", "m", "--enable-lora", "--lora-modules", "sql=/a/sql"], [("sql", "/a/sql", None)]),  # vLLM
    (["--lora-modules", "sql=/a/sql", "chat=/a/chat", "--port", "8000"], [("sql", "/a/sql", None),
                                                                          ("chat", "/a/chat", None)]),
    (["--lora-modules", '{"name": "sql", "path": "/a/sql", "base_model_name": "m"}'], [("sql", "/a/sql", "m")]),
    (["--lora_modules", '[{"name": "sql", "path": "/a/sql"}, "chat=/a/chat"]'], [("sql", "/a/sql", None),
                                                                                  ("chat", "/a/chat", None)]),
])
def test_lora_modules_as_vllm_types_them(argv, expected):
    chosen = settings(*argv).lora_modules
    assert [(module.name, str(module.path), module.base_model_name) for module in chosen] == expected


@pytest.mark.parametrize("value", ["sql", "=/a/sql", '{"name": "sql"}', '{"name": "s", "path": "/p", "rank": 8}'])
def test_a_lora_module_that_is_not_name_and_path_is_an_error(value):
    with pytest.raises(ValueError, match="LoRA module"):
        settings("--lora-modules", value)
