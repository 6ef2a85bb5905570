"""The client-side QPS limit (podmedic/kube/throttle.py), as client-go's token bucket behaves
(k8s.io/client-go/util/flowcontrol/throttle.go: ``qps`` a second, ``burst`` saved, callers wait)."""

from __future__ import annotations

import threading
import time

import pytest

from podmedic.kube.throttle import TokenBucket


def _take_from_threads(bucket: TokenBucket, threads: int, each: int) -> float:
    def work() -> None:
        for _ in range(each):
            bucket.take()

    started = time.monotonic()
    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.monotonic() - started


def test_many_threads_are_paced_to_qps_after_the_burst() -> None:
    bucket = TokenBucket(qps=100, burst=10)
    elapsed = _take_from_threads(bucket, threads=8, each=20)  # 160 tokens
    assert bucket.taken == 160
    assert elapsed >= (160 - 10) / 100 - 0.05
    # Counted by when each token was free to go, not when it was asked for (all at once, here).
    assert 10 <= bucket.max_per_second <= 100 + 10
    assert bucket.waited_s > 0


def test_without_a_limit_nothing_waits_and_every_request_still_counts() -> None:
    bucket = TokenBucket(qps=0, burst=1)
    elapsed = _take_from_threads(bucket, threads=4, each=25)
    assert bucket.taken == 100 and bucket.waited_s == 0 and elapsed < 1.0
    assert bucket.max_per_second == 100


def test_refusals_are_counted_from_any_thread() -> None:
    bucket = TokenBucket(qps=0, burst=1)
    def refuse() -> None:
        for _ in range(1000):
            bucket.note_refused()

    threads = [threading.Thread(target=refuse) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bucket.refused == 4000


@pytest.mark.parametrize(("qps", "burst"), [(-1.0, 1), (1.0, 0)])
def test_a_nonsense_limit_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError, match="qps must be >= 0 and burst >= 1"):
        TokenBucket(qps=qps, burst=burst)
