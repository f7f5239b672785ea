// gloo_link.h's C face over gloo: a gloo rendezvous store backed by our kv_store,
// a TCP device, a fully connected context, and the three collectives the trainer
// needs between nodes. Every gloo exception stops here and becomes -1 plus the
// message (gloo_link_error); nothing C++ crosses into the C callers.
#include "gloo_link.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// gloo's rendezvous over a kv_store, under the link's prefix. gloo waits for the
// keys it needs, then reads them: what the wait fetched is kept for the read.
class KvStore : public gloo::rendezvous::Store {
  public:
    KvStore(kv_store *kv, std::string prefix, int timeout_ms) : kv_(kv), prefix_(std::move(prefix)), timeout_ms_(timeout_ms) {}

    void set(const std::string &key, const std::vector<char> &data) override {
        char err[512];
        if (kv_put(kv_, (prefix_ + key).c_str(), data.data(), data.size(), err, sizeof err) != 0)
            throw std::runtime_error(err);
    }

    std::vector<char> get(const std::string &key) override {
        auto it = fetched_.find(key);
        if (it == fetched_.end()) {
            fetch(key, timeout_ms_);
            it = fetched_.find(key);
        }
        return it->second;
    }

    void wait(const std::vector<std::string> &keys) override { wait(keys, std::chrono::milliseconds(timeout_ms_)); }

    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override {
        for (const auto &key : keys)
            if (fetched_.find(key) == fetched_.end()) fetch(key, (int)timeout.count());
    }

  private:
    void fetch(const std::string &key, int timeout_ms) {
        char err[512];
        void *data = nullptr;
        size_t len = 0;
        if (kv_get(kv_, (prefix_ + key).c_str(), timeout_ms, &data, &len, err, sizeof err) != 0)
            throw std::runtime_error(err);
        fetched_[key] = std::vector<char>(static_cast<char *>(data), static_cast<char *>(data) + len);
        std::free(data);
    }

    kv_store *kv_;
    std::string prefix_;
    int timeout_ms_;
    std::map<std::string, std::vector<char>> fetched_;
};

template <typename T> void sum(void *out, const void *a, const void *b, size_t n) {
    T *o = static_cast<T *>(out);
    const T *x = static_cast<const T *>(a), *y = static_cast<const T *>(b);
    for (size_t i = 0; i < n; i++) o[i] = x[i] + y[i];
}

} // namespace

struct gloo_link {
    std::shared_ptr<gloo::rendezvous::Context> context;
    uint32_t tag = 0; // each call its own, as PyTorch's gloo group does
    std::string error;
    std::vector<uint64_t> mixed; // the staging of gloo_link_allreduce_sum_f32_f64
};

extern "C" gloo_link *gloo_link_open(const gloo_link_options *o, char *err, size_t errlen) {
    if (!o->store || o->rank < 0 || o->size < 1 || o->rank >= o->size) {
        std::snprintf(err, errlen, "gloo link: member %d of %d is not a member", o->rank, o->size);
        return nullptr;
    }
    try {
        gloo::transport::tcp::attr attr;
        if (o->iface && *o->iface) attr.iface = o->iface;
        else attr.hostname = o->hostname && *o->hostname ? o->hostname : "127.0.0.1";
        auto device = gloo::transport::tcp::CreateDevice(attr);
        auto link = std::make_unique<gloo_link>();
        link->context = std::make_shared<gloo::rendezvous::Context>(o->rank, o->size);
        link->context->setTimeout(std::chrono::milliseconds(o->connect_timeout_ms));
        KvStore store(o->store, o->prefix ? o->prefix : "", o->connect_timeout_ms);
        link->context->connectFullMesh(store, device);
        link->context->setTimeout(std::chrono::milliseconds(o->timeout_ms));
        return link.release();
    } catch (const std::exception &e) {
        char where[300];
        std::snprintf(where, sizeof where, "cannot connect to the other nodes (gloo, as member %d of %d, on %s)",
                      o->rank, o->size, o->iface && *o->iface ? o->iface : o->hostname ? o->hostname : "127.0.0.1");
        std::snprintf(err, errlen, "%s: %s; check that every node's part started and that the nodes reach each other at "
                      "these addresses (GLOO_SOCKET_IFNAME names the interface to use)", where, e.what());
        return nullptr;
    }
}

// The most gloo's ring sends at once (two in flight): 4 MiB, where gloo's default is
// 1 MiB. Between two network namespaces on a 2-core VM a 64 MiB all-reduce took
// 59.5-62.0 ms with 1 MiB, 47.5-50.6 ms with 4 MiB, 45.9-48.2 ms with 8 MiB, and
// 250 ms with 16 MiB (too few segments left to pipeline); 4 MiB keeps a margin.
static const size_t kSegmentBytes = (size_t)4 << 20;

// Runs one collective call: 0, or -1 with what gloo threw, as "<what> failed: ...".
template <typename F> static int guarded(gloo_link *l, const char *what, F call) {
    try {
        call();
        return 0;
    } catch (const std::exception &e) {
        l->error = std::string(what) + " between the nodes failed: " + e.what();
        return -1;
    }
}

// gloo's ring all-reduce of out[0..n), in place, summed by `reduce`.
template <typename T, typename R> static int ring_allreduce(gloo_link *l, T *out, size_t n, R reduce) {
    return guarded(l, "an all-reduce", [&] {
        gloo::AllreduceOptions opts(l->context);
        opts.setOutput(out, n);
        opts.setReduceFunction(reduce);
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        opts.setMaxSegmentSize(kSegmentBytes);
        opts.setTag(l->tag++);
        gloo::allreduce(opts);
    });
}

template <typename T> static int allreduce_sum(gloo_link *l, T *buf, size_t n) {
    if (n == 0 || l->context->size == 1) return 0;
    return ring_allreduce(l, buf, n, sum<T>);
}

extern "C" int gloo_link_allreduce_sum_f32(gloo_link *l, float *buf, size_t n) { return allreduce_sum(l, buf, n); }
extern "C" int gloo_link_allreduce_sum_f64(gloo_link *l, double *buf, size_t n) { return allreduce_sum(l, buf, n); }

// Floats and doubles in one all-reduce: staged as 8-byte elements, the floats in
// pairs (padded to an even count) and the doubles after them. gloo's ring cuts its
// segments at whole elements, so a pair or a double is never split, and it reduces
// each segment into the output buffer, so where the first argument points says
// which kind the elements are (test_coll_nodes holds both sums to their exact
// values). The staging buffer is kept between calls (a step's last bucket, each step).
extern "C" int gloo_link_allreduce_sum_f32_f64(gloo_link *l, float *f, size_t nf, double *d, size_t nd) {
    if (l->context->size == 1 || nf + nd == 0) return 0;
    size_t pairs = (nf + 1) / 2;
    try {
        if (l->mixed.size() < pairs + nd) l->mixed.resize(pairs + nd);
    } catch (const std::exception &e) {
        l->error = std::string("out of memory for an all-reduce between the nodes: ") + e.what();
        return -1;
    }
    uint64_t *base = l->mixed.data();
    std::memcpy(base, f, nf * sizeof(float));
    if (nf % 2) reinterpret_cast<float *>(base)[nf] = 0.0f; /* the pad */
    std::memcpy(base + pairs, d, nd * sizeof(double));
    int rc = ring_allreduce(l, base, pairs + nd, [base, pairs](void *out, const void *a, const void *b, size_t n) {
        size_t first = static_cast<size_t>(static_cast<uint64_t *>(out) - base);
        size_t as_pairs = first < pairs ? std::min(n, pairs - first) : 0;
        sum<float>(out, a, b, 2 * as_pairs);
        size_t skip = as_pairs * sizeof(uint64_t);
        sum<double>(static_cast<uint8_t *>(out) + skip, static_cast<const uint8_t *>(a) + skip,
                    static_cast<const uint8_t *>(b) + skip, n - as_pairs);
    });
    if (rc == 0) {
        std::memcpy(f, base, nf * sizeof(float));
        std::memcpy(d, base + pairs, nd * sizeof(double));
    }
    return rc;
}

extern "C" int gloo_link_broadcast(gloo_link *l, void *buf, size_t bytes, int root) {
    if (bytes == 0 || l->context->size == 1) return 0;
    return guarded(l, "a broadcast", [&] {
        gloo::BroadcastOptions opts(l->context);
        opts.setOutput(static_cast<uint8_t *>(buf), bytes);
        opts.setRoot(root);
        opts.setTag(l->tag++);
        gloo::broadcast(opts);
    });
}

extern "C" int gloo_link_barrier(gloo_link *l) {
    if (l->context->size == 1) return 0;
    return guarded(l, "a barrier", [&] {
        gloo::BarrierOptions opts(l->context);
        opts.setTag(l->tag++);
        gloo::barrier(opts);
    });
}

extern "C" const char *gloo_link_error(const gloo_link *l) { return l ? l->error.c_str() : ""; }

extern "C" void gloo_link_close(gloo_link *l) { delete l; }
