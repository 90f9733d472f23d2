"""`dv plan`'s lines on what a replay holds while it runs: the jobs' Spark resources, how long
two jobs run side by side, the sink space; as sentences (text and Markdown) and JSON."""

from __future__ import annotations

from typing import Any

from derived_views.cli.rows import duration
from derived_views.core.preview.footprint import (
    Footprint,
    JobResources,
    PodShape,
    SideBySide,
    SinkSpace,
    SparkFootprint,
)

KIB = 1024
RENDERED_FROM = "as the operator renders its SparkApplication, from the template dv ships"


def size_text(count: float, units: tuple[str, ...] = ("B", "KiB", "MiB", "GiB", "TiB")) -> str:
    """A size in the largest unit it has one of (1 decimal past bytes)."""
    unit = 0
    while count >= KIB and unit < len(units) - 1:
        count, unit = count / KIB, unit + 1
    return f"{count:,.0f} {units[unit]}" if unit == 0 else f"{count:,.1f} {units[unit]}"


def _mib(mib: int) -> str:
    return size_text(mib, ("MiB", "GiB", "TiB"))


def _cores(n: int) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def _pod(pod: PodShape) -> str:
    return (f"{_cores(pod.cores)}, {_mib(pod.pod_memory_mib)} ({_mib(pod.memory_mib)} + "
            f"{_mib(pod.overhead_mib)} overhead)")


def job_text(job: JobResources) -> str:
    executors = job.executor.instances
    placed = (f"{executors} executor{'s' if executors != 1 else ''} of {_pod(job.executor)}"
              if executors else "no executors (its tasks run in the driver)")
    return (f"driver {_pod(job.driver)}; {placed}; in all {_cores(job.cores)}, "
            f"{_mib(job.memory_mib)}")


def spark_lines(spark: SparkFootprint) -> list[str]:
    if spark.job is None:
        return [f"Spark resources: unknown ({spark.not_rendered})"]
    if spark.steady is None:
        lines = [f"Spark resources of a job ({RENDERED_FROM}): {job_text(spark.job)}"]
    else:
        lines = [f"Spark resources of the replay (its backlog reaches DV_REPLAY_MIN_BACKLOG: "
                 f"sized for it, {RENDERED_FROM}): {job_text(spark.job)}",
                 f"then, once its index holds the backlog and before readers switch, the job "
                 f"restarts steady: {job_text(spark.steady)}"]
    both = spark.both
    if both is not None:
        lines.append(f"while both jobs run (the active's is steady and renders from the same "
                     f"spec.spark, restarted if it changed): {_cores(both[0])}, "
                     f"{_mib(both[1])}")
    if spark.running is not None:
        lines.append(f"the view's jobs ask now: {job_text(spark.running)}")
    return lines


def _span(low: int, high: int | None) -> str:
    if high is None:
        return f"at least {duration(low)}, no upper bound"
    return f"about {duration(low)}" if duration(low) == duration(high) else (
        f"{duration(low)} to {duration(high)}")


def side_by_side_line(overlap: SideBySide | None) -> str:
    if overlap is None:
        return "two jobs side by side: none (a new view: no active job runs beside the replay)"
    seconds = overlap.seconds
    if seconds is None:
        return (f"two jobs side by side: the replay's time (unknown) plus "
                f"{_span(*overlap.after_replay)} ({overlap.assumptions})")
    return f"two jobs side by side: {_span(*seconds)} ({overlap.assumptions})"


def sink_line(space: SinkSpace) -> str:
    if space.active_index is None:
        return (f"sink space: a new view: index {space.candidate_index}'s size is unknown "
                "until it is built")
    kept = (f"; {len(space.retained)} index(es) of replaced revisions kept too, not counted "
            f"({', '.join(space.retained)})" if space.retained else "")
    until = (f"both exist from the new job's start until retainPreviousSeconds "
             f"({duration(space.retain_seconds)}) after the cutover")
    peak = space.peak_bytes
    if peak is None or space.active_bytes is None:
        return (f"sink space: active index {space.active_index}: not read ({space.not_read}); "
                f"peak unknown ({until}){kept}")
    return (f"sink space: active index {space.active_index} {size_text(space.active_bytes)}; "
            f"peak about {size_text(peak)} with {space.candidate_index} (estimated at the "
            f"active's size; {until}){kept}")


def footprint_lines(footprint: Footprint) -> list[str]:
    """The footprint in sentences, each format putting them under its cost."""
    lines = spark_lines(footprint.spark)
    if footprint.sink is not None:
        lines += [side_by_side_line(footprint.side_by_side), sink_line(footprint.sink)]
    return lines


def _job_json(job: JobResources | None) -> dict[str, Any] | None:
    if job is None:
        return None

    def pod(shape: PodShape) -> dict[str, Any]:
        return {"instances": shape.instances, "cores": shape.cores,
                "memoryMiB": shape.memory_mib, "overheadMiB": shape.overhead_mib,
                "podMemoryMiB": shape.pod_memory_mib}

    return {"pods": job.pods, "cores": job.cores, "memoryMiB": job.memory_mib,
            "driver": pod(job.driver), "executor": pod(job.executor)}


def spark_json(spark: SparkFootprint) -> dict[str, Any]:
    return {"job": _job_json(spark.job),
            "steady": _job_json(spark.steady),
            "bothJobs": (None if spark.both is None
                         else {"cores": spark.both[0], "memoryMiB": spark.both[1]}),
            "running": _job_json(spark.running),
            "notRendered": spark.not_rendered or None}


def _range(span: tuple[int, int | None] | None) -> dict[str, int | None] | None:
    return None if span is None else {"low": span[0], "high": span[1]}


def side_by_side_json(overlap: SideBySide | None) -> dict[str, Any] | None:
    if overlap is None:
        return None
    return {"seconds": _range(overlap.seconds), "replaySeconds": _range(overlap.replay),
            "afterReplaySeconds": _range(overlap.after_replay),
            "assumptions": overlap.assumptions}


def sink_json(space: SinkSpace) -> dict[str, Any]:
    return {"kind": space.kind, "activeIndex": space.active_index,
            "activeBytes": space.active_bytes, "notRead": space.not_read or None,
            "candidateIndex": space.candidate_index,
            "candidateBytesEstimate": space.active_bytes, "peakBytes": space.peak_bytes, "retainSeconds": space.retain_seconds,
            "retained": list(space.retained)}
