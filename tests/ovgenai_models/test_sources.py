"""What a model reference names and the name it is served under; which file of a repository is chosen."""

from __future__ import annotations

import pytest

from ovgenai_models.errors import ExportError
from ovgenai_models.hub import Listing, choose_gguf
from ovgenai_models.sources import ModelReferenceError, parse_reference, served_name


def test_a_hub_id_is_served_as_it_is_quantization_included():
    reference = parse_reference("OpenVINO/Qwen2.5-7B-Instruct-int4-ov")
    assert (reference.repo_id, reference.quantization, reference.local) == (
        "OpenVINO/Qwen2.5-7B-Instruct-int4-ov", None, None)
    tagged = parse_reference("bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M")
    assert (tagged.repo_id, tagged.quantization) == ("bartowski/Qwen2.5-7B-Instruct-GGUF", "Q4_K_M")
    # Every service configured with the same LLM_MODEL_ID asks for the same name.
    assert tagged.served_name == "bartowski/Qwen2.5-7B-Instruct-GGUF:Q4_K_M"
    assert served_name("meta-llama/Meta-Llama-3-8B-Instruct/") == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert served_name("gpt2") == "gpt2"


def test_a_local_path_is_served_by_its_own_name(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    gguf = tmp_path / "smol.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    assert served_name(str(folder) + "/") == "my-model"
    assert served_name(str(gguf)) == "smol.Q4_1"
    assert parse_reference(str(folder)).local == folder


@pytest.mark.parametrize("text", ["./missing-model", "/no/such/folder", "~/nothing-here-9f3", "missing.gguf"])
def test_a_path_that_does_not_exist_is_said_so(text):
    with pytest.raises(ModelReferenceError, match="does not exist"):
        parse_reference(text)


@pytest.mark.parametrize("text", ["owner/name/extra", "owner/na me", "owner/name:Q4 K", "", "owner/name:a:b"])
def test_what_is_neither_a_path_nor_an_id_is_refused(text):
    with pytest.raises(ModelReferenceError, match="neither an existing file or folder nor a Hugging Face model id"):
        parse_reference(text)
    assert issubclass(ModelReferenceError, ExportError)  # the command line reports it without a traceback


GGUFS = Listing("org/m-GGUF", None, ("README.md", "m-Q4_K_M.gguf", "m-Q4_K.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf",
                                     "m-F16-00001-of-00002.gguf", "m-F16-00002-of-00002.gguf"))


def test_a_quantization_names_one_whole_part_of_a_file_name():
    assert choose_gguf(GGUFS, quantization="q4_k_m") == "m-Q4_K_M.gguf"
    assert choose_gguf(GGUFS, quantization="Q4_K") == "m-Q4_K.gguf"  # not Q4_K_M
    assert choose_gguf(GGUFS, filename="m-Q8_0.gguf") == "m-Q8_0.gguf"
    with pytest.raises(ExportError, match="no GGUF file of quantization 'Q5_K_S'; its GGUF files: m-F16"):
        choose_gguf(GGUFS, quantization="Q5_K_S")
    with pytest.raises(ExportError, match="has no file 'm-Q2.gguf'"):
        choose_gguf(GGUFS, filename="m-Q2.gguf")


def test_several_files_and_no_choice_is_an_error_that_lists_them():
    with pytest.raises(ExportError, match="holds several GGUF files: m-F16-00001-of-00002.gguf, "):
        choose_gguf(GGUFS)
    two = Listing("org/m-GGUF", None, ("m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf"))
    with pytest.raises(ExportError, match="several GGUF files: m-Q4_K_M.gguf, m-Q8_0.gguf. Name one with GGUF_"):
        choose_gguf(two)
    assert choose_gguf(Listing("org/one", None, ("one.Q4_1.gguf", "mmproj-x.gguf"))) == "one.Q4_1.gguf"


def test_a_split_gguf_is_refused_with_the_reason():
    with pytest.raises(ExportError, match="splits m-F16-00001-of-00002.gguf into several files"):
        choose_gguf(GGUFS, quantization="F16")


def test_what_a_repository_holds_decides_how_it_is_prepared():
    assert Listing("o/ir", None, ("openvino_model.xml", "openvino_model.bin", "model.gguf")).kind == "openvino"
    assert Listing("o/g", None, ("README.md", "m.Q4_0.gguf")).kind == "gguf"
    checkpoint = Listing("o/t", None, ("config.json", "model.safetensors", "pytorch_model.bin"))
    assert checkpoint.kind == "transformers"
    assert "pytorch_model*.bin" in checkpoint.checkpoint_ignored()  # safetensors are there: .bin is not fetched
    assert "pytorch_model*.bin" not in Listing("o/t", None, ("config.json", "pytorch_model.bin")).checkpoint_ignored()
