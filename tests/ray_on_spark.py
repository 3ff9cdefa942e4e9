"""Ray inside a Spark cluster, as the how-to page "Runs on a Ray cluster" does it: ``python
tests/ray_on_spark.py spark://HOST:PORT WORKERS`` starts Ray's worker nodes in Spark tasks
(``ray.util.spark.setup_ray_cluster``), prints the Ray address as one JSON line, holds the
cluster until its standard input ends, then shuts it down."""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("RAY_AUTH_MODE", "token")  # Ray's nodes in Spark tasks and this driver alike
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])  # `ray start`
os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors' Python: the one with Ray

from pyspark.sql import SparkSession  # noqa: E402
from ray.util.spark import setup_ray_cluster, shutdown_ray_cluster  # noqa: E402


def main(master: str, workers: int) -> None:
    spark = (SparkSession.builder.master(master).appName("ray-on-spark")
             .config("spark.driver.host", "127.0.0.1").config("spark.executor.cores", "1")
             .config("spark.task.cpus", "1").config("spark.executor.memory", "1g")
             # Ray's nodes hold their executors' cores while the Ray cluster runs: the checks
             # of the same cluster need cores of their own.
             .config("spark.cores.max", str(workers))
             # Ray's nodes start in the executors: they need the same two settings there.
             .config("spark.executorEnv.PATH", os.environ["PATH"])
             .config("spark.executorEnv.RAY_AUTH_MODE", os.environ["RAY_AUTH_MODE"]).getOrCreate())
    try:
        address, _ = setup_ray_cluster(max_worker_nodes=workers, num_cpus_worker_node=1, num_gpus_worker_node=0,
                                       num_cpus_head_node=0)
        print(json.dumps({"address": address}), flush=True)
        sys.stdin.read()
        shutdown_ray_cluster()
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
