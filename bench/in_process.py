"""The same workload on an in-process ContinuousBatchingPipeline: the ceiling the servers are measured against."""

from __future__ import annotations

import time

from bench.stats import RequestTiming


def run_in_process(model_path: str, workload, concurrency: int, scheduler: dict, properties: dict | None = None):
    """Keep `concurrency` requests in flight until the workload is done; per-request timings and the duration.
    `properties` default to what the backend itself asks of this CPU (its precision choice)."""
    import numpy as np
    import openvino
    import openvino_genai

    from ovgenai_common.cpu import default_properties

    config = openvino_genai.SchedulerConfig()
    for key, value in scheduler.items():
        setattr(config, key, value)
    properties = default_properties("CPU") if properties is None else properties
    pipeline = openvino_genai.ContinuousBatchingPipeline(model_path, config, "CPU", properties)
    pending = list(enumerate(workload))
    active: dict[int, tuple] = {}
    timings: dict[int, RequestTiming] = {}
    start = time.perf_counter()

    def admit():
        while pending and len(active) < concurrency:
            index, request = pending.pop(0)
            generation = openvino_genai.GenerationConfig()
            generation.max_new_tokens = request.output_tokens
            generation.ignore_eos = True
            ids = openvino.Tensor(np.asarray([request.prompt_ids], dtype=np.int64))
            timings[index] = RequestTiming(time.perf_counter())
            active[index] = pipeline.add_request(index, ids, generation)

    admit()
    while active:
        pipeline.step()
        now = time.perf_counter()
        for index, handle in list(active.items()):
            if handle.can_read():
                for output in handle.read().values():
                    if output.generated_ids:
                        timings[index].token_times.append(now)
                        timings[index].tokens += len(output.generated_ids)
            if handle.get_status() != openvino_genai.GenerationStatus.RUNNING:
                del active[index]
        admit()
    duration = time.perf_counter() - start
    return [timings[i] for i in range(len(workload))], duration
