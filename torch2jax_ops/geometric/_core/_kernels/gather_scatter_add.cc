// torch2jax_ops' CPU kernel: out[dst[e]] += table[src[e]] for every edge e, as one pass.
//
// The XLA FFI handler behind torch2jax_ops.torch_scatter._native.gather_scatter_add,
// built by `make` (`python -m torch2jax_ops build-kernels`) against jaxlib's FFI headers.
//
//   table [M, *F] (float32 or float64), src [E] int32, dst [E] int32 -> out [N, *F]
//
// An edge with src outside [0, M) or dst outside [0, N) is dropped (ids never wrap).
// Every output row sums its edges in edge order, which is XLA:CPU's order for a gather
// followed by a scatter-add: the same sums to the bit, and deterministic.
//
// The rows of out are split into contiguous ranges, one per thread of XLA's intra-op pool;
// each thread scans the edge list and adds the edges whose dst falls in its range, so no
// two threads write one row. The calling thread works through the ranges too, and waits
// only for ranges another thread has started: no deadlock when the pool is busy.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Below this many added elements (edges x features) one thread does the whole sum: waking
// a second thread costs about 0.3 ms (2-core CPU, 2026-11-26: one thread 0.33 ms vs two
// 0.63 ms at 100k edges x 16, 2.6 vs 1.9 ms at 300k x 16, 11.5 vs 5.3 ms at 300k x 64).
constexpr int64_t kParallelElements = 1 << 22;

// Rows of at least this many bytes are prefetched kAhead edges ahead: at 64 features the
// loads of random rows are what the loop waits for (1M edges x 64: 17 -> 14-15 ms), while at
// 16 features (one cache line) the extra index reads cost more than they hide (6 -> 10 ms).
constexpr int64_t kPrefetchBytes = 128;
constexpr int64_t kAhead = 16;

template <typename T, bool kPrefetch>
void AddEdges(const T* table, int64_t m, const int32_t* src, const int32_t* dst, int64_t edges,
              T* out, int64_t features, int64_t lo, int64_t hi) {
  for (int64_t e = 0; e < edges; ++e) {
    if (kPrefetch && e + kAhead < edges) {
      const int64_t da = dst[e + kAhead], sa = src[e + kAhead];
      if (da >= lo && da < hi && sa >= 0 && sa < m) {
        __builtin_prefetch(table + sa * features);
        __builtin_prefetch(out + da * features, 1);
      }
    }
    const int64_t d = dst[e];
    if (d < lo || d >= hi) continue;
    const int64_t s = src[e];
    if (s < 0 || s >= m) continue;
    const T* __restrict row = table + s * features;
    T* __restrict acc = out + d * features;
    for (int64_t j = 0; j < features; ++j) acc[j] += row[j];
  }
}

// out[lo:hi] = the sum of the rows of the edges whose dst lies in [lo, hi), in edge order.
template <typename T>
void AddRange(const T* table, int64_t m, const int32_t* src, const int32_t* dst, int64_t edges,
              T* out, int64_t features, int64_t lo, int64_t hi) {
  std::memset(out + lo * features, 0, sizeof(T) * (hi - lo) * features);
  if (features * static_cast<int64_t>(sizeof(T)) >= kPrefetchBytes)
    AddEdges<T, true>(table, m, src, dst, edges, out, features, lo, hi);
  else
    AddEdges<T, false>(table, m, src, dst, edges, out, features, lo, hi);
}

struct Shared {
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
};

template <ffi::DataType DT>
ffi::Error GatherScatterAdd(ffi::ThreadPool pool, ffi::AnyBuffer table_any,
                            ffi::Buffer<ffi::S32> src, ffi::Buffer<ffi::S32> dst,
                            ffi::Result<ffi::AnyBuffer> out_any) {
  using T = ffi::NativeType<DT>;
  const auto table_dims = table_any.dimensions();
  const auto out_dims = out_any->dimensions();
  if (table_dims.size() < 1 || out_dims.size() != table_dims.size())
    return ffi::Error::InvalidArgument("gather_scatter_add: table and out need one row axis");
  if (table_any.element_type() != DT || out_any->element_type() != DT)
    return ffi::Error::InvalidArgument("gather_scatter_add: table and out differ in dtype");
  if (src.element_count() != dst.element_count())
    return ffi::Error::InvalidArgument("gather_scatter_add: src and dst differ in length");
  const int64_t m = table_dims[0];
  const int64_t n = out_dims[0];
  int64_t features = 1;
  for (size_t i = 1; i < out_dims.size(); ++i) {
    if (out_dims[i] != table_dims[i])
      return ffi::Error::InvalidArgument("gather_scatter_add: table and out differ in features");
    features *= out_dims[i];
  }
  const int64_t edges = src.element_count();
  const T* table = reinterpret_cast<const T*>(table_any.untyped_data());
  T* out = reinterpret_cast<T*>(out_any->untyped_data());
  const int32_t* s = src.typed_data();
  const int32_t* d = dst.typed_data();
  if (n == 0 || features == 0) return ffi::Error::Success();

  int64_t threads = std::max<int64_t>(1, pool.num_threads());
  if (edges * features < kParallelElements) threads = 1;
  threads = std::min(threads, n);
  if (threads == 1) {
    AddRange<T>(table, m, s, d, edges, out, features, 0, n);
    return ffi::Error::Success();
  }
  // The tasks may start after this call returned (all ranges taken): they hold the
  // shared state, and copies of the pointers, by value.
  auto shared = std::make_shared<Shared>();
  const int64_t ranges = threads;
  auto work = [=]() {
    for (;;) {
      const int64_t r = shared->next.fetch_add(1);
      if (r >= ranges) return;
      AddRange<T>(table, m, s, d, edges, out, features, n * r / ranges, n * (r + 1) / ranges);
      if (shared->done.fetch_add(1) + 1 == ranges) {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->cv.notify_all();
      }
    }
  };
  for (int64_t t = 1; t < threads; ++t) {
    auto task = work;
    pool.Schedule(std::move(task));
  }
  work();
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done.load() == ranges; });
  return ffi::Error::Success();
}

}  // namespace

#define T2J_GATHER_SCATTER_ADD(NAME, DT)                                                 \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, GatherScatterAdd<DT>,                              \
                                ffi::Ffi::Bind()                                         \
                                    .Ctx<ffi::ThreadPool>()                              \
                                    .Arg<ffi::AnyBuffer>()                               \
                                    .Arg<ffi::Buffer<ffi::S32>>()                        \
                                    .Arg<ffi::Buffer<ffi::S32>>()                        \
                                    .Ret<ffi::AnyBuffer>());

T2J_GATHER_SCATTER_ADD(T2jGatherScatterAddF32, ffi::F32)
T2J_GATHER_SCATTER_ADD(T2jGatherScatterAddF64, ffi::F64)
