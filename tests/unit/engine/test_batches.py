"""When a batch's failures stop the play: ansible-core aborts only when the failed share is
strictly over max_fail_percentage, and always when every host of the batch failed."""
from fleetops.engine.batches import batch_abort, order_hosts

BATCH = ["h1", "h2", "h3", "h4"]


def test_at_the_percentage_the_play_goes_on():
    assert batch_abort(BATCH, ["h1"], 0, 25) is None
    assert batch_abort(BATCH, ["h1", "h2"], 0, 50) is None


def test_over_the_percentage_the_play_stops_and_says_why():
    why = batch_abort(BATCH, ["h1", "h2"], 1, 25)
    assert why == "max_fail_percentage exceeded: 2 of 4 hosts of batch 2 failed (50% > 25%)"
    assert batch_abort(BATCH, ["h3"], 0, 0).startswith("max_fail_percentage exceeded: 1 of 4")


def test_a_batch_where_every_host_failed_stops_the_play_without_a_percentage():
    assert batch_abort(BATCH, list(BATCH), 2, None) == "all hosts of batch 3 failed"
    assert batch_abort(BATCH, ["h1", "h2", "h3"], 0, None) is None
    assert batch_abort(BATCH, [], 0, 0) is None


def test_a_percentage_of_100_still_stops_a_batch_that_failed_entirely():
    assert batch_abort(BATCH, list(BATCH), 0, 100) == "all hosts of batch 1 failed"


def test_order():
    assert order_hosts(["b", "a", "c"], "sorted") == ["a", "b", "c"]
    assert order_hosts(["b", "a", "c"], "reverse_sorted") == ["c", "b", "a"]
    assert order_hosts(["b", "a", "c"], "reverse_inventory") == ["c", "a", "b"]
    assert order_hosts(["b", "a", "c"], "inventory") == ["b", "a", "c"]
    assert sorted(order_hosts(["b", "a", "c"], "shuffle")) == ["a", "b", "c"]
