# syntax=docker/dockerfile:1
# ddpd for the NVIDIA container runtime.
#
#   docker build -t ddpd .
#   docker run -d --gpus all --shm-size=1g -p 127.0.0.1:8080:8080 \
#       -e DDPD_TOKEN=$(openssl rand -hex 16) \
#       -v ddpd-state:/var/lib/ddpd -v /usr/share/datasets:/usr/share/datasets:ro ddpd
#
# Two stages. The build stage is NVIDIA's CUDA development image (nvcc, cuBLAS,
# NCCL's headers) and runs the very steps CI runs: scripts/install-deps.sh, then
# scripts/build.sh. The runtime stage is the matching CUDA runtime image (cudart,
# cuBLAS, NCCL), with the few libraries the binaries link (the same script's
# --runtime list), the binaries and the dashboard's files, running as a user of
# its own. Inside the container ddpd listens on every interface; publish the port
# on the host's loopback (as above) or behind a proxy. Without DDPD_TOKEN it refuses
# to start, unless told --insecure.
ARG CUDA_VERSION=13.0.1
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
WORKDIR /src
# The dependency script and what it reads first, alone: this layer stays cached
# while the code changes.
COPY scripts/install-deps.sh scripts/install-deps.sh
COPY package.json package-lock.json ./
RUN scripts/install-deps.sh
COPY . .
RUN scripts/build.sh \
 && install -d /opt/ddpd/bin /opt/ddpd/share/ddpd/vendor \
 && install -m 0755 build/bin/ddpd build/bin/ddp-trainer build/bin/ddpctl /opt/ddpd/bin/ \
 && cp -r web /opt/ddpd/share/ddpd/web \
 && cp -r node_modules/uplot/dist /opt/ddpd/share/ddpd/vendor/uplot

FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU} AS runtime
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime \
 && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
 && groupadd --system --gid 10001 ddpd \
 && useradd --system --uid 10001 --gid ddpd --home-dir /var/lib/ddpd --shell /usr/sbin/nologin ddpd \
 && install -d -o ddpd -g ddpd -m 0700 /var/lib/ddpd \
 && install -d -m 0755 /usr/share/datasets
COPY --from=build /opt/ddpd /opt/ddpd
# Every library the binaries link is here (libcuda comes from the host's driver
# at run time, through the NVIDIA runtime), and they start.
RUN ! ldd /opt/ddpd/bin/ddpd /opt/ddpd/bin/ddp-trainer /opt/ddpd/bin/ddpctl | grep "not found" \
 && /opt/ddpd/bin/ddpd --version && /opt/ddpd/bin/ddp-trainer --version

ENV PATH=/opt/ddpd/bin:$PATH \
    DDPD_LISTEN=0.0.0.0:8080 \
    DDPD_STATE_DIR=/var/lib/ddpd \
    DDPD_DATA_ROOT=/usr/share/datasets
# The database, the event socket and the runs' directories (checkpoints, logs);
# and the datasets run configs may read (mount them read-only).
VOLUME ["/var/lib/ddpd", "/usr/share/datasets"]
WORKDIR /var/lib/ddpd
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS -o /dev/null http://127.0.0.1:8080/healthz || exit 1
# SIGTERM: ddpd cancels active runs (SIGTERM, SIGKILL 10 s later) and closes the
# database; give it the time (docker stop -t 30, compose's stop_grace_period).
STOPSIGNAL SIGTERM
ENTRYPOINT ["ddpd"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
