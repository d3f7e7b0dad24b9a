# passlb's container image: `passlb controller` and `passlb lb` (deploy/, docs/install.md).
#
#   docker build -t passlb:dev .
#
# Two stages: the build compiles the TypeScript to dist/ and keeps only the runtime
# dependencies; the runtime image adds the kernel tools the LB host drives. The default user
# is an unprivileged one (65532), which is all the controller needs. The LB DaemonSet runs
# as root with NET_ADMIN and NET_RAW (nftables, addresses, policy routes, keepalived's VRRP and
# gratuitous ARP / unsolicited neighbour advertisements): deploy/lb-daemonset.yaml sets that.

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM node:20-bookworm-slim
# nftables: the data plane; iproute2: addresses and policy routes; keepalived: VRRP for
# `--announce l2` (docs/vip-announce.md); iputils-arping: the lab's and operators' ARP checks.
RUN apt-get update \
  && apt-get install -y --no-install-recommends nftables iproute2 keepalived iputils-arping \
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
