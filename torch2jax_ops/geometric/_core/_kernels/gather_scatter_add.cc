// torch2jax_ops' CPU kernels for sums of gathered rows, each one pass over the edges.
//
// The XLA FFI handlers behind torch2jax_ops.geometric._core._cpu_kernel, built by `make`
// (`python -m torch2jax_ops build-kernels`) against jaxlib's FFI headers.
//
//   GatherScatterAdd:  out[dst[e]] += table[src[e]]
//     table [M, *F] (float32 or float64), src [E] int32, dst [E] int32 -> out [N, *F]
//   WeightedGatherScatterAdd:  out[dst[e], h, :] += weight[e, h] * table[src[e], h, :]
//     table [M, *H, C], weight [E, *H], src [E], dst [E] -> out [N, *H, C]
//   EdgeDot:  out[e, h] = sum_c a[ia[e], h, c] * b[ib[e], h, c]
//     a [Ma, *H, C], b [Mb, *H, C], ia [E], ib [E] -> out [E, *H]
//
// The weighted sum and the edge dot are the two halves of attention message passing (the
// weighted sum's gradient w.r.t. its weights is the edge dot, and the reverse): with them
// an attention layer moves no [E, H, C] buffer through memory.
//
// An edge with src outside [0, M) or dst outside [0, N) is dropped (ids never wrap); an
// edge dot with an id out of range is 0. Every output row sums its edges in edge order,
// which is XLA:CPU's order for a gather followed by a scatter-add: the same sums to the
// bit, and deterministic (the weighted sum rounds each product first, as XLA does).
//
// The sums' rows of out are split into contiguous ranges, one per thread of XLA's intra-op pool;
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

// Calls add(e, table row of src[e], out row of dst[e]) for the edges whose dst lies in
// [lo, hi) and whose src lies in [0, m), in edge order (kPrefetch: the rows of the edge
// kAhead on are prefetched).
template <typename T, bool kPrefetch, typename Add>
void ForEdges(const T* table, int64_t m, const int32_t* src, const int32_t* dst, int64_t edges,
              T* out, int64_t features, int64_t lo, int64_t hi, Add add) {
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
    add(e, table + s * features, out + d * features);
  }
}

template <typename T, bool kPrefetch>
void AddEdges(const T* table, int64_t m, const int32_t* src, const int32_t* dst, int64_t edges,
              T* out, int64_t features, int64_t lo, int64_t hi) {
  ForEdges<T, kPrefetch>(table, m, src, dst, edges, out, features, lo, hi,
                         [features](int64_t, const T* __restrict row, T* __restrict acc) {
                           for (int64_t j = 0; j < features; ++j) acc[j] += row[j];
                         });
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

// How many ranges to split `elements` of work over `limit` rows into: the pool's threads
// (with the calling one), or one below kParallelElements.
int64_t Threads(ffi::ThreadPool& pool, int64_t elements, int64_t limit) {
  int64_t threads = std::max<int64_t>(1, pool.num_threads());
  if (elements < kParallelElements) threads = 1;
  return std::max<int64_t>(1, std::min(threads, limit));
}

// Runs fn(r) for r in [0, ranges) on the pool and the calling thread; returns when all are
// done. The tasks may start after this call returned (all ranges taken): they hold the
// shared state, and fn, by value. The calling thread works through the ranges too, and
// waits only for ranges another thread has started: no deadlock when the pool is busy.
template <typename Fn>
void RunRanges(ffi::ThreadPool& pool, int64_t ranges, Fn fn) {
  if (ranges == 1) {
    fn(0);
    return;
  }
  auto shared = std::make_shared<Shared>();
  auto work = [=]() {
    for (;;) {
      const int64_t r = shared->next.fetch_add(1);
      if (r >= ranges) return;
      fn(r);
      if (shared->done.fetch_add(1) + 1 == ranges) {
        std::lock_guard<std::mutex> lock(shared->mu);
        shared->cv.notify_all();
      }
    }
  };
  for (int64_t t = 1; t < ranges; ++t) {
    auto task = work;
    pool.Schedule(std::move(task));
  }
  work();
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done.load() == ranges; });
}

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

  const int64_t threads = Threads(pool, edges * features, n);
  RunRanges(pool, threads, [=](int64_t r) {
    AddRange<T>(table, m, s, d, edges, out, features, n * r / threads, n * (r + 1) / threads);
  });
  return ffi::Error::Success();
}

// out[dst[e], h, :] += weight[e, h] * table[src[e], h, :] for the edges whose dst lies in
// [lo, hi), in edge order; out[lo:hi] zeroed first.
template <typename T, bool kPrefetch>
void WeightedAddEdges(const T* table, int64_t m, const T* weight, int64_t heads,
                      int64_t channels, const int32_t* src, const int32_t* dst, int64_t edges,
                      T* out, int64_t lo, int64_t hi) {
  ForEdges<T, kPrefetch>(
      table, m, src, dst, edges, out, heads * channels, lo, hi,
      [=](int64_t e, const T* __restrict row, T* __restrict acc) {
        const T* w = weight + e * heads;
        for (int64_t h = 0; h < heads; ++h) {
          const T wh = w[h];
          for (int64_t j = 0; j < channels; ++j) {
            const T product = wh * row[h * channels + j];  // rounded, then added: XLA's steps
            acc[h * channels + j] += product;
          }
        }
      });
}

// The feature layout [rows, *H, C] of `table` against `weight` [E, *H]: heads = prod(H),
// channels = C; false when the shapes do not fit.
bool Layout(ffi::Span<const int64_t> table_dims, ffi::Span<const int64_t> weight_dims,
            int64_t* heads, int64_t* channels) {
  if (table_dims.size() != weight_dims.size() + 1 || weight_dims.size() < 1) return false;
  *heads = 1;
  for (size_t i = 1; i < weight_dims.size(); ++i) {
    if (weight_dims[i] != table_dims[i]) return false;
    *heads *= weight_dims[i];
  }
  *channels = table_dims[table_dims.size() - 1];
  return true;
}

template <ffi::DataType DT>
ffi::Error WeightedGatherScatterAdd(ffi::ThreadPool pool, ffi::AnyBuffer table_any,
                                    ffi::AnyBuffer weight_any, ffi::Buffer<ffi::S32> src,
                                    ffi::Buffer<ffi::S32> dst,
                                    ffi::Result<ffi::AnyBuffer> out_any) {
  using T = ffi::NativeType<DT>;
  const auto table_dims = table_any.dimensions();
  const auto out_dims = out_any->dimensions();
  int64_t heads = 1, channels = 1;
  if (!Layout(table_dims, weight_any.dimensions(), &heads, &channels) ||
      out_dims.size() != table_dims.size())
    return ffi::Error::InvalidArgument(
        "weighted_gather_scatter_add: expected table [M, *H, C], weight [E, *H]");
  for (size_t i = 1; i < out_dims.size(); ++i)
    if (out_dims[i] != table_dims[i])
      return ffi::Error::InvalidArgument(
          "weighted_gather_scatter_add: table and out differ in features");
  if (table_any.element_type() != DT || weight_any.element_type() != DT ||
      out_any->element_type() != DT)
    return ffi::Error::InvalidArgument("weighted_gather_scatter_add: dtypes differ");
  const int64_t edges = src.element_count();
  if (dst.element_count() != edges || weight_any.dimensions()[0] != edges)
    return ffi::Error::InvalidArgument(
        "weighted_gather_scatter_add: src, dst and weight differ in length");
  const int64_t m = table_dims[0], n = out_dims[0], features = heads * channels;
  const T* table = reinterpret_cast<const T*>(table_any.untyped_data());
  const T* weight = reinterpret_cast<const T*>(weight_any.untyped_data());
  T* out = reinterpret_cast<T*>(out_any->untyped_data());
  const int32_t* s = src.typed_data();
  const int32_t* d = dst.typed_data();
  if (n == 0 || features == 0) return ffi::Error::Success();
  const bool prefetch = features * static_cast<int64_t>(sizeof(T)) >= kPrefetchBytes;
  const int64_t threads = Threads(pool, edges * features, n);
  RunRanges(pool, threads, [=](int64_t r) {
    const int64_t lo = n * r / threads, hi = n * (r + 1) / threads;
    std::memset(out + lo * features, 0, sizeof(T) * (hi - lo) * features);
    if (prefetch)
      WeightedAddEdges<T, true>(table, m, weight, heads, channels, s, d, edges, out, lo, hi);
    else
      WeightedAddEdges<T, false>(table, m, weight, heads, channels, s, d, edges, out, lo, hi);
  });
  return ffi::Error::Success();
}

// out[e, h] = sum_c a[ia[e], h, c] * b[ib[e], h, c] for e in [lo, hi); 0 for an id out of
// range. Each edge writes its own entries: the edges are split into ranges.
template <typename T>
void DotEdges(const T* a, int64_t ma, const T* b, int64_t mb, int64_t heads, int64_t channels,
              const int32_t* ia, const int32_t* ib, int64_t edges, T* out, int64_t lo,
              int64_t hi) {
  const int64_t features = heads * channels;
  const bool prefetch = features * static_cast<int64_t>(sizeof(T)) >= kPrefetchBytes;
  for (int64_t e = lo; e < hi; ++e) {
    if (prefetch && e + kAhead < hi) {
      const int64_t pa = ia[e + kAhead], pb = ib[e + kAhead];
      if (pa >= 0 && pa < ma) __builtin_prefetch(a + pa * features);
      if (pb >= 0 && pb < mb) __builtin_prefetch(b + pb * features);
    }
    const int64_t x = ia[e], y = ib[e];
    T* o = out + e * heads;
    if (x < 0 || x >= ma || y < 0 || y >= mb) {
      for (int64_t h = 0; h < heads; ++h) o[h] = T(0);
      continue;
    }
    for (int64_t h = 0; h < heads; ++h) {
      const T* __restrict ra = a + x * features + h * channels;
      const T* __restrict rb = b + y * features + h * channels;
      T total = T(0);
      for (int64_t j = 0; j < channels; ++j) total += ra[j] * rb[j];
      o[h] = total;
    }
  }
}

template <ffi::DataType DT>
ffi::Error EdgeDot(ffi::ThreadPool pool, ffi::AnyBuffer a_any, ffi::AnyBuffer b_any,
                   ffi::Buffer<ffi::S32> ia, ffi::Buffer<ffi::S32> ib,
                   ffi::Result<ffi::AnyBuffer> out_any) {
  using T = ffi::NativeType<DT>;
  const auto a_dims = a_any.dimensions();
  const auto b_dims = b_any.dimensions();
  int64_t heads = 1, channels = 1;
  if (!Layout(a_dims, out_any->dimensions(), &heads, &channels) ||
      b_dims.size() != a_dims.size())
    return ffi::Error::InvalidArgument("edge_dot: expected a [Ma, *H, C], out [E, *H]");
  for (size_t i = 1; i < a_dims.size(); ++i)
    if (a_dims[i] != b_dims[i])
      return ffi::Error::InvalidArgument("edge_dot: a and b differ in features");
  if (a_any.element_type() != DT || b_any.element_type() != DT ||
      out_any->element_type() != DT)
    return ffi::Error::InvalidArgument("edge_dot: dtypes differ");
  const int64_t edges = ia.element_count();
  if (ib.element_count() != edges || out_any->dimensions()[0] != edges)
    return ffi::Error::InvalidArgument("edge_dot: ia, ib and out differ in length");
  const T* a = reinterpret_cast<const T*>(a_any.untyped_data());
  const T* b = reinterpret_cast<const T*>(b_any.untyped_data());
  T* out = reinterpret_cast<T*>(out_any->untyped_data());
  const int32_t* pa = ia.typed_data();
  const int32_t* pb = ib.typed_data();
  const int64_t ma = a_dims[0], mb = b_dims[0];
  if (edges == 0 || heads == 0) return ffi::Error::Success();
  const int64_t threads = Threads(pool, edges * heads * channels, edges);
  RunRanges(pool, threads, [=](int64_t r) {
    DotEdges<T>(a, ma, b, mb, heads, channels, pa, pb, edges, out, edges * r / threads,
                edges * (r + 1) / threads);
  });
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

// both: two float arrays and two int32 id arrays in, one array out
#define T2J_TWO_TABLES(NAME, FN, DT)                                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, FN<DT>,                                            \
                                ffi::Ffi::Bind()                                         \
                                    .Ctx<ffi::ThreadPool>()                              \
                                    .Arg<ffi::AnyBuffer>()                               \
                                    .Arg<ffi::AnyBuffer>()                               \
                                    .Arg<ffi::Buffer<ffi::S32>>()                        \
                                    .Arg<ffi::Buffer<ffi::S32>>()                        \
                                    .Ret<ffi::AnyBuffer>());

T2J_TWO_TABLES(T2jWeightedGatherScatterAddF32, WeightedGatherScatterAdd, ffi::F32)
T2J_TWO_TABLES(T2jWeightedGatherScatterAddF64, WeightedGatherScatterAdd, ffi::F64)
T2J_TWO_TABLES(T2jEdgeDotF32, EdgeDot, ffi::F32)
T2J_TWO_TABLES(T2jEdgeDotF64, EdgeDot, ffi::F64)
