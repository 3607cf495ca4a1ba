"""Wall time of the whole ``curate`` flow, Prefect start-up included.

Each repeat is a fresh process (``essaybench curate``) with a fresh Prefect home and
store, as a newcomer's first run would be.

- Default: the bundled sample (``data/sources.yaml``). Target: ≤ 60 s on this 2-core machine.
- ``--records N``: a generated chat log of N JSONL records (seeded), curated with the
  project's ``configs/curate.yaml`` parameters; also prints the peak memory of the
  command's whole process tree (sampled every 0.1 s) and its funnel. Target for 50,000
  records: ≤ 3 min and ≤ 2 GiB. The log mixes what real ones hold: essay requests from
  ``dedup_kmeans``'s template × topic generator with its planted rewordings (45%; half of
  them asked again word for word, as popular homework is), other chat requests — code,
  translation, recipes, letters, poems, plans, one-line greetings — (45%), conversations
  in the ``messages`` form (7%, two user turns each), and broken lines (3%: invalid JSON,
  no query field).

    python benchmarks/curate_flow.py --repeats 3
    python benchmarks/curate_flow.py --records 50000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repo root
from benchmarks.dedup_kmeans import make_corpus

TARGET_S = 60.0
RECORDS_TARGET_S = 180.0
RECORDS_TARGET_BYTES = 2 * 1024**3
PROJECT = Path(__file__).resolve().parents[1]

OTHER_REQUESTS = [
    "把这句话翻译成英文：{t}是我们每个人都需要的。", "{t}用英语怎么说？",
    "用Python写一个函数，找出{n}以内的所有质数", "帮我写一段SQL，统计每个班{t}得分前{m}名",
    "{t}怎么做才好吃？需要准备哪些材料", "推荐{m}本关于{t}的书", "明天{city}会下雨吗",
    "帮我算一下{n}乘以{m}等于多少", "给我讲一个关于{t}的笑话", "写一首关于{t}的七言绝句",
    "帮我给{p}写一封感谢信，{n}字左右", "帮我写一份以{t}为主题的班会活动方案",
    "写一条关于{t}的朋友圈文案，{m}个字以内", "帮我把下面这段话改得通顺一点：{t}很重要，我们要{t}",
    "{city}有哪些好玩的地方？玩{m}天怎么安排", "你好，你是谁", "谢谢", "在吗",
    "解释一下什么是{t}，用{m}句话", "帮我写{m}条{t}的标语",
]
TOPICS = ["诚信", "环保", "垃圾分类", "人工智能", "读书", "运动", "理想", "友谊", "节约用水",
          "安全", "感恩", "坚持", "时间管理", "科技", "传统文化", "红烧肉", "饺子", "番茄炒蛋"]
PEOPLE = ["班主任", "妈妈", "同学", "邻居", "医生", "老校长"]
CITIES = ["北京", "上海", "杭州", "成都", "西安", "广州"]


def write_chat_log(path: Path, records: int, seed: int) -> None:
    """A chat log of ``records`` raw records (a conversation's two user turns are two),
    its lines in a seeded random order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    # a conversation holds two user turns, two records: collect counts each turn
    n_conv = round(records * 0.07 / 2)
    n_essay, n_other = (round(records * s) for s in (0.45, 0.45))
    n_broken = records - n_essay - n_other - 2 * n_conv
    # make_corpus draws distinct template × topic pairs: at most ~11k prompts
    essays = make_corpus(min(n_essay // 2 or 1, 11_000), seed).texts
    lines: list[str] = []
    for i in range(n_essay):
        text = essays[i] if i < len(essays) else essays[int(rng.integers(len(essays)))]
        lines.append(json.dumps({"id": f"e{i}", "query": text}, ensure_ascii=False))
    for i in range(n_other):
        template = OTHER_REQUESTS[int(rng.integers(len(OTHER_REQUESTS)))]
        text = template.format(
            t=TOPICS[int(rng.integers(len(TOPICS)))], p=PEOPLE[int(rng.integers(len(PEOPLE)))],
            city=CITIES[int(rng.integers(len(CITIES)))], n=int(rng.integers(10, 2000)),
            m=int(rng.integers(2, 11)))
        lines.append(json.dumps({"id": f"o{i}", "query": text}, ensure_ascii=False))
    for i in range(n_conv):
        ask = essays[int(rng.integers(len(essays)))]
        lines.append(json.dumps({"id": f"c{i}", "messages": [
            {"role": "system", "content": "你是一个写作助手。"},
            {"role": "user", "content": ask},
            {"role": "assistant", "content": "好的，下面是一篇范文……"},
            {"role": "user", "content": "再写长一点"}]}, ensure_ascii=False))
    for i in range(n_broken):
        lines.append(f'{{"id": "b{i}", "query": "写一篇' if i % 2 else
                     json.dumps({"id": f"b{i}", "text": "字段名不对"}, ensure_ascii=False))
    order = rng.permutation(len(lines))
    path.write_text("\n".join(lines[int(i)] for i in order) + "\n", encoding="utf-8")


def generated_config(folder: Path, records: int, seed: int) -> Path:
    write_chat_log(folder / "chat.jsonl", records, seed)
    (folder / "sources.yaml").write_text(
        "sources:\n  - {name: chat, kind: chat_jsonl, path: chat.jsonl}\n", encoding="utf-8")
    project = (PROJECT / "configs" / "curate.yaml").read_text(encoding="utf-8")
    config = folder / "curate.yaml"
    config.write_text(project.replace("../data/sources.yaml", str(folder / "sources.yaml"))
                      .replace("../data/overrides.yaml",
                               str(PROJECT / "data" / "overrides.yaml")), encoding="utf-8")
    return config


class PeakMemory:
    """The largest total RSS of a process and its descendants, sampled every 0.1 s."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            total = 0
            try:
                for proc in (self.root, *self.root.children(recursive=True)):
                    total += proc.memory_info().rss
            except psutil.Error:  # a process ended between listing and reading
                pass
            self.peak = max(self.peak, total)
            self._done.wait(0.1)

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


def one_run(essaybench: str, config: Path | None = None) -> tuple[float, int, float, str]:
    """(seconds, peak bytes, CPU seconds, stdout) of one ``essaybench curate`` in a fresh
    home and store. CPU time (user + system, of the command and the processes it waited
    for) says what the run costs when the shared machine is busy and wall time does not."""
    tmp = Path(tempfile.mkdtemp(prefix="eb-bench-"))
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "120"}
    command = [essaybench, "curate", "--store", str(tmp / "store")]
    if config is not None:
        command += ["--config", str(config)]
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        memory = PeakMemory(proc.pid)
        out, err = proc.communicate()
        seconds, peak = time.perf_counter() - t0, memory.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            sys.exit(f"essaybench curate failed (exit {proc.returncode}): {err.strip()[-500:]}")
        return seconds, peak, cpu, out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--records", type=int, default=None,
                        help="curate a generated chat log of this many records")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    essaybench = shutil.which("essaybench") or str(Path(sys.executable).parent / "essaybench")
    if args.records is None:
        times = [one_run(essaybench)[0] for _ in range(args.repeats)]
        med = statistics.median(times)
        verdict = "PASS" if med <= TARGET_S else "FAIL"
        print(f"curate flow on bundled sample: runs {', '.join(f'{t:.1f}' for t in times)} s; "
              f"median {med:.1f} s (target ≤ {TARGET_S:.0f} s): {verdict}")
        return
    with tempfile.TemporaryDirectory(prefix="eb-records-") as folder:
        config = generated_config(Path(folder), args.records, args.seed)
        seconds, peak, cpu, out = one_run(essaybench, config)
    funnel = [line.strip() for line in out.splitlines() if line.startswith("raw ")]
    ok = seconds <= RECORDS_TARGET_S and peak <= RECORDS_TARGET_BYTES
    print(f"curate flow on {args.records:,} generated records (seed {args.seed}): "
          f"{seconds:.1f} s ({cpu:.0f} CPU-s; load average {os.getloadavg()[0]:.1f}), "
        f"peak memory {peak / 1024**3:.2f} GiB (process tree) "
          f"(targets ≤ {RECORDS_TARGET_S:.0f} s, ≤ 2 GiB): {'PASS' if ok else 'FAIL'}")
    print(f"funnel: {funnel[0] if funnel else '(not printed)'}")


if __name__ == "__main__":
    main()
