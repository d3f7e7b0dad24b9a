// SPDX-License-Identifier: Apache-2.0
/*
 * passlb's XDP fast path for the LB host (docs/dataplane-xdp.md).
 *
 * One decision per packet, before the kernel builds an skb, with the same semantics as the
 * nftables path (docs/dataplane-nftables.md "A packet's path"):
 *   VIP . protocol . port lookup        miss → XDP_PASS (not ours: ARP, NDP, probes, BGP, SSH…)
 *   loadBalancerSourceRanges (LPM trie) miss → XDP_DROP (the nft chain drops them too)
 *   flow table (LRU hash, 5-tuple)      a TCP SYN skips it, takes the current Maglev choice
 *                                       and overwrites its entry (Katran,
 *                                       katran/lib/bpf/balancer_kern.c); every other packet
 *                                       follows its entry while that node is live; a miss
 *                                       or a node that left takes the current choice
 *   weighted Maglev ring                written by the same TypeScript as the nft slot maps;
 *                                       slot = jhash(tuple) scaled to M exactly as nft's
 *                                       `jhash … mod M seed S` (net/netfilter/nft_hash.c)
 *   forward                             rewrite MACs, decrement TTL / hop limit (RFC 1624
 *                                       checksum update, as samples/bpf/xdp_fwd_kern.c),
 *                                       XDP_TX or a devmap redirect
 * Everything it does not fully understand or cannot forward itself goes to the stack with
 * XDP_PASS, where the nftables table makes the same choice: IPv4 options and fragments, IPv6
 * extension headers, VLAN tags, TTL ≤ 1, frames above the node's MTU, nodes whose neighbour
 * is unresolved and routed (encapsulated) nodes.
 *
 * Does not: encapsulate, answer ICMP, track FIN/RST (the LB sees one direction only; the LRU
 * ages entries out), or hash like the userspace proxy.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#ifndef PASSLB_SOURCE_SHA256
#define PASSLB_SOURCE_SHA256 "unknown"
#endif
/* the object names the source it was built from (test/xdp/xdp-object.test.ts checks it) */
const char passlb_source[] SEC(".passlb.source") = "passlb-xdp-source-sha256:" PASSLB_SOURCE_SHA256;

#define MAX_LISTENERS 65536
#define MAX_NODES 16384
#define MAX_SERVICES 65536
#define RING_SLOTS (1 << 22)
#define MAX_RING_IDS 65536 /* ring_ids: distinct rings in use, twice over during a pass */
#ifndef FLOW_ENTRIES
#define FLOW_ENTRIES 262144
#endif

/* vip flags */
#define VIP_SRC_RANGES 1 /* loadBalancerSourceRanges: check src_ranges */
#define VIP_CLIENT_IP 2  /* sessionAffinity ClientIP: hash the client address only */
#define VIP_ZONES 4      /* zonal affinity: a client zone may have a ring of its own */

/* node flags */
#define NODE_LIVE 1  /* a member of some plan: its flows stay with it */
#define NODE_XDP 2   /* on this host's segment with a resolved neighbour: XDP forwards */

enum reason {
	R_PASS_NOT_IP, R_PASS_NOT_VIP, R_PASS_IP_OPTIONS, R_PASS_FRAGMENT, R_PASS_L4,
	R_PASS_TTL, R_PASS_MTU, R_PASS_NODE, R_DROP_SOURCE, R_DROP_NO_NODES,
	R_FWD_TX, R_FWD_REDIRECT, R_FLOW_NEW, R_FLOW_HIT, R_FLOW_REPLACED, R_SYN_RATE,
	R_MAX,
};

struct vip_key {
	__u8 family; /* 4 or 6 */
	__u8 proto;
	__be16 port;
	__u8 addr[16];
};

struct vip_value {
	__u32 listener;  /* key of src_ranges / zone_rings */
	__u32 service;   /* index into svc_stats */
	__u32 ring_id;   /* key of ring_ids; 0: the Service has no node (the nft chain drops) */
	__u32 reserved;
	__u32 flags;
};

struct lpm_key {
	__u32 prefixlen; /* 32 + bits of the address prefix */
	__be32 listener;
	__u8 addr[16];
};

/* Where a ring lives: a swap writes the new ring into a free block, then replaces this one
 * hash element, so every VIP sharing the ring moves at once and a packet reads the old
 * ring or the new one (docs/dataplane-xdp.md "Maps"). */
struct ring_ref {
	__u32 ring_base; /* first slot in `rings` */
	__u32 ring_size; /* M; 0: no node */
};

struct node {
	__u32 ifindex;
	__u32 flags;
	__u32 gen; /* changes whenever the index names another node */
	__u32 mtu;
	__u8 dmac[6];
	__u8 smac[6];
};

struct flow_key {
	__u8 family;
	__u8 proto;
	__be16 sport;
	__be16 dport;
	__u16 pad;
	__u8 src[16];
	__u8 dst[16];
};

struct flow {
	__u32 node;
	__u32 gen;
	__u64 atime; /* ns, refreshed at most once a second */
};

struct config {
	__u32 seed;           /* the nftables path's --seed */
	__u32 udp_timeout_s;  /* a UDP entry older than this is a new flow */
	__u32 max_syn_per_cpu; /* per second; above it SYNs are forwarded without a flow entry */
	__u32 last_gen;       /* control plane only: the last node generation handed out */
};

struct counter {
	__u64 packets;
	__u64 bytes;
};

struct syn_rate {
	__u64 window;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_LISTENERS);
	__type(key, struct vip_key);
	__type(value, struct vip_value);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RING_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES);
	__type(key, __u32);
	__type(value, struct node);
} nodes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FLOW_ENTRIES);
	__uint(map_flags, BPF_F_NO_COMMON_LRU);
	__type(key, struct flow_key);
	__type(value, struct flow);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u8);
} src_ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u32); /* ring id */
} zone_rings SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_RING_IDS);
	__type(key, __u32);
	__type(value, struct ring_ref);
} ring_ids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct config);
} config SEC(".maps");

/* names for the control plane only (a restarted passlb adopts the indexes): node index →
 * "<node>/<family>", Service index → "<namespace>/<name>"; never read by the program. Hashes,
 * not arrays, so a dump lists only the indexes in use. */
struct name {
	char text[128];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_NODES);
	__type(key, __u32);
	__type(value, struct name);
} node_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct name);
} svc_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SERVICES);
	__type(key, __u32);
	__type(value, struct counter);
} svc_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_NODES);
	__type(key, __u32);
	__type(value, struct counter);
} node_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, R_MAX);
	__type(key, __u32);
	__type(value, struct counter);
} reasons SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct syn_rate);
} syn_rates SEC(".maps");

static __always_inline void count(void *map, __u32 index, __u64 bytes)
{
	struct counter *c = bpf_map_lookup_elem(map, &index);

	if (c) {
		c->packets++;
		c->bytes += bytes;
	}
}

static __always_inline int verdict(int action, __u32 why, __u64 bytes)
{
	count(&reasons, why, bytes);
	return action;
}

/* Bob Jenkins' lookup3 as the kernel's jhash() computes it over a multiple of four bytes
 * (include/linux/jhash.h: __jhash_mix, __jhash_final, JHASH_INITVAL). */
static __always_inline __u32 rol32(__u32 w, unsigned int s)
{
	return (w << s) | (w >> (32 - s));
}

#define JHASH_MIX(a, b, c)                                                                   \
	do {                                                                                 \
		a -= c; a ^= rol32(c, 4); c += b;                                            \
		b -= a; b ^= rol32(a, 6); a += c;                                            \
		c -= b; c ^= rol32(b, 8); b += a;                                            \
		a -= c; a ^= rol32(c, 16); c += b;                                           \
		b -= a; b ^= rol32(a, 19); a += c;                                           \
		c -= b; c ^= rol32(b, 4); b += a;                                            \
	} while (0)

#define JHASH_FINAL(a, b, c)                                                                 \
	do {                                                                                 \
		c ^= b; c -= rol32(b, 14);                                                   \
		a ^= c; a -= rol32(c, 11);                                                   \
		b ^= a; b -= rol32(a, 25);                                                   \
		c ^= b; c -= rol32(b, 16);                                                   \
		a ^= c; a -= rol32(c, 4);                                                    \
		b ^= a; b -= rol32(a, 14);                                                   \
		c ^= b; c -= rol32(b, 24);                                                   \
	} while (0)

/* n: 1, 4 or 10 words (nft registers: an address, or address . port . address . port with
 * every field padded to four bytes) */
static __always_inline __u32 jhash_words(const __u32 *k, __u32 n, __u32 seed)
{
	__u32 a, b, c;

	a = b = c = 0xdeadbeef + (n << 2) + seed;
	if (n > 3) {
		a += k[0]; b += k[1]; c += k[2];
		JHASH_MIX(a, b, c);
	}
	if (n > 6) {
		a += k[3]; b += k[4]; c += k[5];
		JHASH_MIX(a, b, c);
		a += k[6]; b += k[7]; c += k[8];
		JHASH_MIX(a, b, c);
		a += k[9];
	} else if (n == 4) {
		a += k[3];
	} else {
		a += k[0];
	}
	JHASH_FINAL(a, b, c);
	return c;
}

/* the slot of nft's `jhash <fields> mod M seed S`: reciprocal_scale(jhash, M) */
static __always_inline __u32 ring_slot(const struct flow_key *fk, __u32 client_only, __u32 size,
				       __u32 seed)
{
	__u32 w[10] = {};
	__u32 h;

	if (fk->family == 4) {
		__builtin_memcpy(&w[0], fk->src, 4);
		if (client_only) {
			h = jhash_words(w, 1, seed);
		} else {
			w[1] = fk->sport;
			__builtin_memcpy(&w[2], fk->dst, 4);
			w[3] = fk->dport;
			h = jhash_words(w, 4, seed);
		}
	} else {
		__builtin_memcpy(&w[0], fk->src, 16);
		if (client_only) {
			h = jhash_words(w, 4, seed);
		} else {
			w[4] = fk->sport;
			__builtin_memcpy(&w[5], fk->dst, 16);
			w[9] = fk->dport;
			h = jhash_words(w, 10, seed);
		}
	}
	return (__u32)(((__u64)h * size) >> 32);
}

/* RFC 1624 eqn. 3 for the TTL byte of the TTL/protocol word, as samples/bpf/xdp_fwd_kern.c */
static __always_inline void ipv4_decrement_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;

	check += bpf_htons(0x0100);
	ip->check = (__sum16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

/* Katran's new-connection guard (balancer_kern.c, MAX_CONN_RATE): past the per-CPU budget
 * of a second, a SYN is forwarded by the ring but writes no flow entry, so a flood cannot
 * evict the established flows. */
static __always_inline int syn_budget_left(const struct config *cfg, __u64 now)
{
	__u32 zero = 0;
	struct syn_rate *r = bpf_map_lookup_elem(&syn_rates, &zero);

	if (!r || cfg->max_syn_per_cpu == 0)
		return 1;
	if (now - r->window > 1000000000ULL) {
		r->window = now;
		r->count = 0;
	}
	return ++r->count <= cfg->max_syn_per_cpu;
}

static __always_inline int pick_ring(const struct vip_value *vip, const struct flow_key *fk,
				     struct ring_ref *out)
{
	__u32 id = vip->ring_id;
	struct ring_ref *ref;

	if (vip->flags & VIP_ZONES) {
		struct lpm_key k = { .prefixlen = 32 + (fk->family == 4 ? 32 : 128),
				     .listener = bpf_htonl(vip->listener) };
		__u32 *zone;

		__builtin_memcpy(k.addr, fk->src, 16);
		zone = bpf_map_lookup_elem(&zone_rings, &k);
		if (zone)
			id = *zone;
	}
	if (id == 0)
		return 0;
	ref = bpf_map_lookup_elem(&ring_ids, &id);
	if (!ref)
		return 0;
	*out = *ref;
	return out->ring_size != 0;
}

/* The node of a packet: its flow's while that node is live, else the ring's (and the flow
 * entry is written). Returns the node index, or -1 when the ring has no node.
 * A write counts R_FLOW_NEW when the tuple had no entry (the table grew by one, unless the
 * LRU evicted another: the control plane derives evictions from this and the table's
 * size) and R_FLOW_REPLACED when it overwrote one (a SYN on a reused tuple, an entry whose
 * node left or changed, an expired UDP entry). */
static __always_inline int choose_node(const struct vip_value *vip, const struct flow_key *fk,
				       int syn, __u64 bytes)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	__u64 now = bpf_ktime_get_ns();
	struct ring_ref ring;
	struct flow *f = 0;
	struct flow fresh = {};
	struct node *n;
	__u32 slot, *idx;

	if (!cfg)
		return -1;
	if (!syn) {
		f = bpf_map_lookup_elem(&flows, fk);
		if (f) {
			n = bpf_map_lookup_elem(&nodes, &f->node);
			int expired = fk->proto == IPPROTO_UDP && cfg->udp_timeout_s &&
				      now - f->atime > (__u64)cfg->udp_timeout_s * 1000000000ULL;
			if (n && (n->flags & NODE_LIVE) && n->gen == f->gen && !expired) {
				if (now - f->atime > 1000000000ULL)
					f->atime = now;
				count(&reasons, R_FLOW_HIT, bytes);
				return f->node;
			}
		}
	}
	if (!pick_ring(vip, fk, &ring))
		return -1;
	slot = ring_slot(fk, vip->flags & VIP_CLIENT_IP, ring.ring_size, cfg->seed);
	slot += ring.ring_base;
	idx = bpf_map_lookup_elem(&rings, &slot);
	if (!idx)
		return -1;
	n = bpf_map_lookup_elem(&nodes, idx);
	if (!n)
		return -1;
	if (syn && !syn_budget_left(cfg, now)) {
		count(&reasons, R_SYN_RATE, bytes);
		return *idx;
	}
	/* only to count the write below: a SYN over the budget (a flood) pays no lookup */
	if (syn)
		f = bpf_map_lookup_elem(&flows, fk);
	fresh.node = *idx;
	fresh.gen = n->gen;
	fresh.atime = now;
	bpf_map_update_elem(&flows, fk, &fresh, BPF_ANY);
	count(&reasons, f ? R_FLOW_REPLACED : R_FLOW_NEW, bytes);
	return *idx;
}

SEC("xdp")
int passlb_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	struct ethhdr *eth = data;
	struct flow_key fk = {};
	struct vip_key vk = {};
	struct iphdr *ip4 = 0;
	struct ipv6hdr *ip6 = 0;
	void *l4;
	int syn = 0;

	if ((void *)(eth + 1) > data_end)
		return verdict(XDP_PASS, R_PASS_NOT_IP, bytes);
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		ip4 = (void *)(eth + 1);
		if ((void *)(ip4 + 1) > data_end)
			return verdict(XDP_PASS, R_PASS_NOT_IP, bytes);
		if (ip4->ihl != 5)
			return verdict(XDP_PASS, R_PASS_IP_OPTIONS, bytes);
		if (ip4->frag_off & bpf_htons(0x3fff)) /* MF or an offset */
			return verdict(XDP_PASS, R_PASS_FRAGMENT, bytes);
		fk.family = 4;
		fk.proto = ip4->protocol;
		__builtin_memcpy(fk.src, &ip4->saddr, 4);
		__builtin_memcpy(fk.dst, &ip4->daddr, 4);
		l4 = ip4 + 1;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end)
			return verdict(XDP_PASS, R_PASS_NOT_IP, bytes);
		fk.family = 6;
		fk.proto = ip6->nexthdr;
		__builtin_memcpy(fk.src, &ip6->saddr, 16);
		__builtin_memcpy(fk.dst, &ip6->daddr, 16);
		l4 = ip6 + 1;
	} else {
		return verdict(XDP_PASS, R_PASS_NOT_IP, bytes);
	}
	if (fk.proto == IPPROTO_TCP) {
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) > data_end)
			return verdict(XDP_PASS, R_PASS_L4, bytes);
		fk.sport = tcp->source;
		fk.dport = tcp->dest;
		syn = tcp->syn && !tcp->ack;
	} else if (fk.proto == IPPROTO_UDP) {
		struct udphdr *udp = l4;

		if ((void *)(udp + 1) > data_end)
			return verdict(XDP_PASS, R_PASS_L4, bytes);
		fk.sport = udp->source;
		fk.dport = udp->dest;
	} else {
		return verdict(XDP_PASS, R_PASS_L4, bytes);
	}

	vk.family = fk.family;
	vk.proto = fk.proto;
	vk.port = fk.dport;
	__builtin_memcpy(vk.addr, fk.dst, 16);
	struct vip_value *vip = bpf_map_lookup_elem(&vips, &vk);
	if (!vip)
		return verdict(XDP_PASS, R_PASS_NOT_VIP, bytes);

	if (vip->flags & VIP_SRC_RANGES) {
		struct lpm_key k = { .prefixlen = 32 + (fk.family == 4 ? 32 : 128),
				     .listener = bpf_htonl(vip->listener) };

		__builtin_memcpy(k.addr, fk.src, 16);
		if (!bpf_map_lookup_elem(&src_ranges, &k))
			return verdict(XDP_DROP, R_DROP_SOURCE, bytes);
	}
	count(&svc_stats, vip->service, bytes);

	int chosen = choose_node(vip, &fk, syn, bytes);
	if (chosen < 0)
		return verdict(XDP_DROP, R_DROP_NO_NODES, bytes);
	__u32 index = chosen;
	struct node *n = bpf_map_lookup_elem(&nodes, &index);
	if (!n || !(n->flags & NODE_XDP))
		return verdict(XDP_PASS, R_PASS_NODE, bytes); /* routed or unresolved: nftables */
	if (bytes - sizeof(*eth) > n->mtu)
		return verdict(XDP_PASS, R_PASS_MTU, bytes); /* the kernel fragments or says PTB */
	if (ip4) {
		if (ip4->ttl <= 1)
			return verdict(XDP_PASS, R_PASS_TTL, bytes); /* the kernel sends time exceeded */
		ipv4_decrement_ttl(ip4);
	} else if (ip6) {
		if (ip6->hop_limit <= 1)
			return verdict(XDP_PASS, R_PASS_TTL, bytes);
		ip6->hop_limit--;
	}
	__builtin_memcpy(eth->h_dest, n->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, n->smac, ETH_ALEN);
	count(&node_stats, index, bytes);
	if (n->ifindex == ctx->ingress_ifindex)
		return verdict(XDP_TX, R_FWD_TX, bytes);
	count(&reasons, R_FWD_REDIRECT, bytes);
	return bpf_redirect_map(&tx_ports, n->ifindex, XDP_PASS);
}

/* for the receiving side of a veth that XDP_TX or a redirect sends to: a veth drops frames
 * whose peer has neither an XDP program nor GRO (drivers/net/veth.c veth_xdp_xmit) */
SEC("xdp")
int passlb_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
