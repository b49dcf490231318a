"""Same-host direct copies (src/transport/placement.h): targets on the client's host copy large
write payloads out of the client's memory and write read data straight into it. Checked with
the real CLI and the targets' /metrics, over each transport, and with the switch off."""
import os

from test_metrics import scrape

SIZE = 6 * (1 << 20) + 12345  # six whole 1 MiB stripes and a partial one


def direct_bytes(cluster):
    totals = {"placed": 0, "pulled": 0, "fallbacks": 0}
    names = {"placed": "penstock_transport_server_placed_bytes_total",
             "pulled": "penstock_transport_server_pulled_bytes_total",
             "fallbacks": "penstock_transport_server_placement_fallbacks_total"}
    for d in cluster.record["daemons"]:
        if d["name"] == "mgmt":
            continue
        _, samples = scrape(d["metrics"])
        for key, name in names.items():
            totals[key] += sum(v for _, v in samples.get(name, []))
    return totals


def round_trip(cluster, tmp_path, name, *flags):
    src = tmp_path / f"{name}.in"
    src.write_bytes(os.urandom(SIZE))
    back = tmp_path / f"{name}.out"
    cluster.cli("put", str(src), name, "--container", "data", *flags)
    cluster.cli("get", name, str(back), "--container", "data", *flags)
    assert back.read_bytes() == src.read_bytes()


def test_local_targets_copy_straight_to_and_from_the_clients_memory(cluster, tmp_path):
    before = direct_bytes(cluster)
    round_trip(cluster, tmp_path, "direct-on")
    after = direct_bytes(cluster)
    # Every stripe of 64 KiB or more went both ways without the transport (the head is small).
    assert after["pulled"] - before["pulled"] >= SIZE - 12345
    assert after["placed"] - before["placed"] >= SIZE - 12345
    assert after["fallbacks"] == before["fallbacks"]


def test_with_direct_copies_off_the_bytes_travel_over_the_transport(cluster, tmp_path):
    before = direct_bytes(cluster)
    round_trip(cluster, tmp_path, "direct-off", "--local-direct", "false")
    after = direct_bytes(cluster)
    assert after == before
