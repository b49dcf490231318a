"""Client settings from arguments and the environment, with the CLI's names and rules
(src/cli/output.cc): an argument wins over PENSTOCK_<NAME>, which wins over the default."""
import os

from .errors import InvalidArgument

_TRUE = {"true", "1", "yes", "on", "y", "t"}
_FALSE = {"false", "0", "no", "off", "n", "f"}


def _env(name):
    value = os.environ.get("PENSTOCK_" + name)
    return None if value is None or value == "" else value


def _integer(name, value, low, high):
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name}={value!r} is not a whole number: give one in {low}..{high}") from None
    if not low <= n <= high:
        raise InvalidArgument(f"{name}={n} is out of range: give one in {low}..{high}")
    return n


def _boolean(name, value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise InvalidArgument(f"{name}={value!r} is not a boolean: use true or false")


def resolve(mgmt=None, api_key=None, tls_ca=None, tls_cert=None, tls_key=None, timeout_ms=None,
            data_workers=None, local_direct=None, net_devices=None):
    """The keyword arguments of the native Client: each from its argument, else PENSTOCK_<NAME>,
    else the CLI's default. Raises InvalidArgument naming the setting."""
    def pick(arg, env):
        return arg if arg is not None else _env(env)

    devices = pick(net_devices, "NET_DEVICES")
    if isinstance(devices, str):
        devices = devices.split(";")
    return {
        "mgmt": pick(mgmt, "MGMT") or "127.0.0.1:7000",
        "api_key": pick(api_key, "API_KEY") or "",
        "tls_ca": pick(tls_ca, "TLS_CA") or "",
        "tls_cert": pick(tls_cert, "TLS_CERT") or "",
        "tls_key": pick(tls_key, "TLS_KEY") or "",
        "timeout_ms": _integer("timeout_ms (PENSTOCK_TIMEOUT_MS)", pick(timeout_ms, "TIMEOUT_MS") or 30000,
                               100, 3600000),
        "data_workers": _integer("data_workers (PENSTOCK_DATA_WORKERS)", pick(data_workers, "DATA_WORKERS") or 1,
                                 1, 64),
        "local_direct": _boolean("local_direct (PENSTOCK_LOCAL_DIRECT)",
                                 True if pick(local_direct, "LOCAL_DIRECT") is None
                                 else pick(local_direct, "LOCAL_DIRECT")),
        "net_devices": list(devices or []),
    }
