# passlb's container image: `passlb controller` and `passlb lb` (deploy/, docs/install.md).
#
#   docker build -t passlb:dev .
#
# Two stages: the build compiles the TypeScript to dist/ and keeps only the runtime
# dependencies; the runtime image adds the kernel tools the LB host drives. The default user
# is an unprivileged one (65532), which is all the controller needs. The LB DaemonSet runs
# as root with NET_ADMIN and NET_RAW (nftables, addresses, policy routes, keepalived's VRRP and
# gratuitous ARP / unsolicited neighbour advertisements, BIRD's BGP and BFD sockets):
# deploy/lb-daemonset.yaml sets that explicitly.
#
# Node.js 24 (LTS, supported until 2028-04-30) on Debian 13 "trixie": node:20 reached its
# end of life on 2026-04-30. The code also runs on Node 20 and 22 (package.json `engines`,
# docs/install.md "Node.js versions"); CI runs 20.

FROM node:24-trixie-slim AS build
# clang and libbpf-dev compile the XDP program of `passlb lb --dataplane xdp` (docs/dataplane-xdp.md)
RUN apt-get update \
  && apt-get install -y --no-install-recommends clang llvm libbpf-dev \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts ./scripts
RUN npm run build && npm run build:xdp && npm prune --omit=dev --no-audit --no-fund

FROM node:24-trixie-slim
# nftables: the data plane; iproute2: addresses and policy routes; keepalived: VRRP for
# `--announce l2` (docs/vip-announce.md); iputils-arping and ndisc6: the wire checks' ARP and
# neighbour solicitations, tcpdump: the foreign VRRP speaker watch ("Checked from the wire");
# conntrack: release UDP flows pinned to a node that left a Service's table
# (docs/dataplane-nftables.md) and remove stale UDP entries on nodes (docs/agent-dataplane.md);
# bird2: the BGP speaker of `--announce bgp` (docs/vip-announce.md); bpftool: loads and updates the
# XDP program (dist/bpf/passlb-xdp.o, built in the first stage). keepalived is started
# by passlb; BIRD too standalone, while in the cluster it runs as the LB pod's own `bird`
# container from this image (deploy/components/announce-bgp, `--bgp-speaker=external`).
RUN apt-get update \
  && apt-get install -y --no-install-recommends nftables iproute2 iputils-arping conntrack bird2 keepalived ndisc6 tcpdump bpftool \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/passlb
ENV NODE_ENV=production
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY src/web/assets ./src/web/assets
COPY bin ./bin
COPY README.md ./
RUN ln -s /opt/passlb/bin/passlb.js /usr/local/bin/passlb \
  && ln -s /opt/passlb/bin/kubectl-passlb /usr/local/bin/kubectl-passlb
USER 65532:65532
EXPOSE 9797
ENTRYPOINT ["passlb"]
CMD ["--help"]
