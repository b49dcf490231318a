// status_error.h — how a Status becomes a Python exception: the class of its code from
// penstock.errors (NotFound is also a FileNotFoundError, InvalidArgument a ValueError, ...),
// built with the status message and carrying the code as `.code`. Call with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "penstock/status.h"

namespace penstock::python {

// The exception instance for a non-OK `status` (what a Future is failed with).
pybind11::object StatusException(const Status& status);

// Sets `status` as the pending Python exception and throws pybind11::error_already_set.
[[noreturn]] void ThrowStatus(const Status& status);

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(result).value();
}

}  // namespace penstock::python
