"""The model file's pages released after the warm-up: memory given back, the answers unchanged, nothing else touched."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ovgenai_server.engine.engine_process.weight_pages import file_mappings, releasable


def test_only_read_only_data_mappings_of_the_model_s_own_files_are_released(tmp_path):
    tmp_path = tmp_path.resolve()  # as /proc/<pid>/maps names files
    model = tmp_path / "m"
    (model / "sub").mkdir(parents=True)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    maps = "\n".join([
        f"7f0000000000-7f0000100000 r--s 00000000 08:01 11 {model}/openvino_model.bin",
        f"7f0000100000-7f0000200000 rw-p 00000000 08:01 12 {model}/scratch.bin",
        f"7f0000200000-7f0000300000 r--p 00000000 08:01 13 {tmp_path}/other/openvino_model.bin",
        f"7f0000300000-7f0000400000 r--s 00000000 08:01 14 {model}/old.bin (deleted)",
        f"7f0000400000-7f0000500000 r-xp 00000000 08:01 15 {tmp_path}/libopenvino.so",
        "7f0000500000-7f0000600000 rw-p 00000000 00:00 0 [heap]",
        "7f0000600000-7f0000700000 rw-p 00000000 00:00 0",
        f"7f0000700000-7f0000800000 r--p 00000000 08:01 16 {model}/openvino tokenizer.bin",
        f"7f0000800000-7f0000900000 r--p 00000000 08:01 17 {model}/sub/adapter.bin",
        f"7f0000900000-7f0000a00000 r--p 00000000 08:01 18 {gguf}",
    ])
    mappings = file_mappings(maps)
    assert [m.path.name for m in mappings] == ["openvino_model.bin", "scratch.bin", "openvino_model.bin",
                                               "libopenvino.so", "openvino tokenizer.bin", "adapter.bin", "model.gguf"]
    # A writable mapping may hold changed pages (dropping them would lose data); another model's are not ours.
    assert [(m.path.name, m.start) for m in releasable(mappings, model)] == [
        ("openvino_model.bin", 0x7F0000000000), ("openvino tokenizer.bin", 0x7F0000700000)]
    # A GGUF file: that file alone, never code or data that happens to live beside it.
    assert [m.path for m in releasable(mappings, gguf)] == [gguf]


def resident_kb(folder: Path) -> int:
    """This process's resident size of the mappings of files in `folder`: RSS, not PSS, which would share the pages
    out among other processes that map the same file (servers of other tests)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        header = re.match(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$", line)
        if header:
            inside = header.group(1).startswith(str(folder.resolve()) + "/")
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def greedy(pipeline, request_id: int) -> list[int]:
    import openvino
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 8
    config.ignore_eos = True
    ids = openvino.Tensor(np.asarray([[1, 504, 3575, 314, 260, 1345, 282]], dtype=np.int64))
    handle = pipeline.add_request(request_id, ids, config)
    while pipeline.has_non_finished_requests():
        pipeline.step()
    [output] = handle.read_all()
    return list(output.generated_ids)
