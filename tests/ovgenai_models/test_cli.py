"""`python -m ovgenai_models`'s command line with the preparation faked: OVMS export_model.py's flags and
defaults, the options reaching the export, a refusal printed as one line with exit code 2, and a command handed to
the environment with the conversion tools when they are missing here. The real exports: system/test_export.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from ovgenai_models import cli, pull
from ovgenai_models.errors import ExportError, ExportToolsMissing


@pytest.fixture(autouse=True)
def no_hub_token(monkeypatch):
    monkeypatch.delenv("HUGGINGFACEHUB_API_TOKEN", raising=False)


def test_weight_format_defaults_are_export_model_s():
    parse = cli.build_parser().parse_args
    assert parse(["text_generation", "--source_model", "m"]).weight_format == "int8"
    assert parse(["embeddings_ov", "--source_model", "m"]).weight_format is None  # fp16, or int8 with quant_mode
    assert parse(["rerank", "--source_model", "m"]).weight_format == "int8"
    assert parse(["rerank", "--source_model", "m", "--weight_format", "fp16"]).weight_format == "fp16"
    with pytest.raises(SystemExit):
        parse(["embeddings", "--source_model", "m", "--weight-format", "auto"])  # auto is for LLMs only


def test_text_generation_options_reach_the_export(monkeypatch, tmp_path, capsys):
    asked = {}

    def pulled(source, name, repository, options, _overwrite, _revision, gguf_filename):
        asked.update(source=source, name=name, repository=repository, options=options, gguf=gguf_filename)
        target = repository / name
        target.mkdir(parents=True)
        (target / "openvino_model.bin").write_bytes(b"x" * 2_000_000)
        return target

    monkeypatch.setattr(pull, "pull_text_generation", pulled)
    code = cli.main(["text_generation", "--source_model", "owner/model:Q4_0", "--model_repository_path",
                     str(tmp_path), "--weight-format", "int4", "--group_size", "64", "--no-enable_prefix_caching",
                     "--prompt_lookup_decoding", "--gguf_filename", "f.gguf"])
    assert code == 0
    options = asked["options"]
    assert (options.weight_format, options.group_size, options.enable_prefix_caching,
            options.prompt_lookup_decoding) == ("int4", 64, False, True)
    assert asked["gguf"] == "f.gguf" and asked["repository"] == tmp_path
    out = capsys.readouterr().out
    assert "(2.0 MB)" in out and f"serve it with: python -m ovgenai_server --model {tmp_path}" in out


def test_a_refusal_is_one_line_and_exit_code_2(monkeypatch, capsys):
    def refuse(*_args):
        raise ExportError("'owner/model' is gated or private")

    monkeypatch.setattr(pull, "pull_encoder", refuse)
    assert cli.main(["rerank", "--source_model", "owner/model"]) == 2
    assert capsys.readouterr().err == "error: 'owner/model' is gated or private\n"


def test_missing_tools_hand_the_command_on_or_say_so(monkeypatch, capsys):
    def missing(*_args):
        raise ExportToolsMissing("install the export tools")

    monkeypatch.setattr(pull, "pull_encoder", missing)
    handed = []
    monkeypatch.setattr(cli, "run_with_export_tools", lambda argv, _error: handed.append(argv) or 0)
    argv = ["embeddings", "--source_model", "owner/model"]
    assert cli.main(argv) == 0 and handed == [argv]

    def nowhere(_argv, error):
        raise error

    monkeypatch.setattr(cli, "run_with_export_tools", nowhere)
    assert cli.main(argv) == 2 and "error: install the export tools" in capsys.readouterr().err


def test_calibration_texts_go_with_full_int8(tmp_path):
    parse = cli.build_parser().parse_args
    assert cli.calibration_texts(parse(["embeddings", "--source_model", "m"])) is None
    file = tmp_path / "texts.txt"
    file.write_text("first text\n\n  second text  \n")
    args = parse(["embeddings", "--source_model", "m", "--quant_mode", "int8", "--calibration_file", str(file)])
    assert cli.calibration_texts(args) == ["first text", "second text"]
    with pytest.raises(ExportError, match="--calibration_file goes with --quant_mode int8"):
        cli.calibration_texts(parse(["embeddings", "--source_model", "m", "--calibration_file", str(file)]))
    file.write_text("\n")
    with pytest.raises(ExportError, match="has no texts"):
        cli.calibration_texts(args)


def test_the_served_name_defaults_to_the_source(monkeypatch, tmp_path):
    names = []
    monkeypatch.setattr(pull, "pull_encoder", lambda _kind, _source, name, *_: names.append(name) or Path(tmp_path))
    cli.main(["embeddings", "--source_model", "owner/Model-1", "--model_repository_path", str(tmp_path)])
    cli.main(["embeddings", "--source_model", "owner/Model-1", "--model_name", "mine"])
    assert names == ["owner/Model-1", "mine"]
