import pytest

from rate_limiter import TokenBucket


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


def drain(bucket, limit=1000):
    count = 0
    while count < limit and bucket.try_acquire():
        count += 1
    return count


def test_starts_full(clock):
    assert TokenBucket(3, 1, clock=clock).tokens == 3.0


def test_acquire_until_empty(clock):
    bucket = TokenBucket(3, 1, clock=clock)
    assert drain(bucket) == 3
    assert not bucket.try_acquire()


def test_refills_over_time(clock):
    bucket = TokenBucket(3, 2, clock=clock)
    drain(bucket)
    clock.advance(0.5)
    assert bucket.tokens == 1.0
    assert bucket.try_acquire()
    assert not bucket.try_acquire()


def test_tokens_never_exceed_capacity(clock):
    bucket = TokenBucket(5, 1, clock=clock)
    clock.advance(60)
    assert bucket.tokens == 5.0


def test_burst_after_idle_is_limited(clock):
    bucket = TokenBucket(5, 1, clock=clock)
    drain(bucket)
    clock.advance(60)
    assert drain(bucket) == 5


def test_wait_time(clock):
    bucket = TokenBucket(2, 4, clock=clock)
    assert bucket.wait_time() == 0.0
    drain(bucket)
    assert bucket.wait_time(1) == 0.25


def test_request_larger_than_capacity_is_refused(clock):
    bucket = TokenBucket(2, 1, clock=clock)
    assert not bucket.try_acquire(3)
    assert bucket.tokens == 2.0


def test_invalid_arguments(clock):
    with pytest.raises(ValueError):
        TokenBucket(0, 1, clock=clock)
    with pytest.raises(ValueError):
        TokenBucket(1, 1, clock=clock).try_acquire(0)
