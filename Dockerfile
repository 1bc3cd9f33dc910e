# SPDX-License-Identifier: MIT
# strata in a container: built from Debian 12 packages only (nothing vendored, nothing downloaded
# outside apt). Data lives in /data (LMDB hot store; cold tier in /data/cold by default).
#   docker build -t strata .
# The image listens on 0.0.0.0:8080 (a container's port is reached from outside), so strata's
# protected mode makes you choose at `docker run` — it refuses to start open on that address:
#   with auth (tokens from your identity provider, or an HS256 secret):
#     docker run -p 8080:8080 -v strata-data:/data \
#       -e STRATA_JWT_JWKS_URL=https://sso.example.com/realms/shop/protocol/openid-connect/certs \
#       -e STRATA_JWT_ISSUER=https://sso.example.com/realms/shop strata
#     docker run -p 8080:8080 -v strata-data:/data -e STRATA_JWT_SECRET=change-me strata
#   open, knowingly (published on the host's loopback only, or behind a proxy that authenticates):
#     docker run -p 127.0.0.1:8080:8080 -v strata-data:/data -e STRATA_INSECURE=1 strata
# STRATA_INSECURE is deliberately not set here.
# Background work (encoding cold objects, compaction, an erasure's LMDB writes) yields the CPU to
# serving at SCHED_IDLE only where a thread may come back from it: the image's non-root user needs
# `docker run --ulimit nice=20` for that; without it that work runs at the normal policy.
FROM debian:12-slim AS build
WORKDIR /src
COPY tools/install-deps.sh tools/
RUN tools/install-deps.sh
COPY . .
# ST_JEMALLOC=ON: the build fails rather than fall back to glibc's malloc (the image has libjemalloc2)
RUN ST_JEMALLOC=ON tools/build.sh release && strip build/strata

FROM debian:12-slim
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends libuv1 liblmdb0 libcjson1 libzstd1 \
      libcurl4 libssl3 zlib1g libwebsockets17 libwebsockets-evlib-uv libraft2 liburing2 libjemalloc2 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /data strata && mkdir -p /data && chown strata /data
COPY --from=build /src/build/strata /usr/local/bin/strata
USER strata
WORKDIR /data
ENV STRATA_LISTEN=0.0.0.0:8080 STRATA_DATA_DIR=/data STRATA_COLD_URL=file:///data/cold
EXPOSE 8080
VOLUME /data
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=2s CMD ["curl", "-fsS", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/strata"]
