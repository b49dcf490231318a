// export.h — PENSTOCK_API marks what libpenstock.so exports: the classes and functions declared
// in include/penstock. Everything else in the library (the client's internals, gRPC, protobuf,
// abseil, UCX, spdlog) is built with -fvisibility=hidden and stays inside it.
//
// The same marking serves the library's build and its users (GCC and clang): a default-visible
// declaration is exported where it is defined and found in libpenstock.so where it is called.
// Inline functions and templates (Result<T>, the Status helpers) need no mark: they are compiled
// into the program that uses them.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define PENSTOCK_API [[gnu::visibility("default")]]
#else
#define PENSTOCK_API
#endif
