# sluiced in a container (docs/deployment.md):
#   docker build -t sluice .
#   docker run -e SLUICE_PASSWORD=... -p 7379:7379 -v sluice-state:/var/lib/sluice sluice
# The build stage installs the project's build packages (scripts/deps.sh
# --build) and installs into a staging directory; the image that runs has
# only the runtime libraries and the two programs.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/deps.sh scripts/deps.sh
RUN scripts/deps.sh --build && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TESTS=OFF -DSLUICE_BENCH=OFF \
    && cmake --build /build -j "$(nproc)" \
    && DESTDIR=/stage cmake --install /build --prefix /usr/local

FROM debian:12-slim
# What sluiced and sluice link: libuv, libyaml, cJSON, hiredis, and for the
# gRPC face nghttp2 and protobuf-c (and libc).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libuv1 libyaml-0-2 libcjson1 libhiredis0.14 \
       libnghttp2-14 libprotobuf-c1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/sluice --shell /usr/sbin/nologin sluice \
    && install -d -o sluice -g sluice -m 0700 /var/lib/sluice
COPY --from=build /stage/usr/local/bin/sluiced /stage/usr/local/bin/sluice /usr/local/bin/
COPY dist/docker/entrypoint.sh /usr/local/bin/sluice-entrypoint
USER sluice
# The snapshot: state survives a restart of the container.
VOLUME /var/lib/sluice
# RESP, and HTTP when SLUICE_HTTP_PORT=7380 turns it on.
EXPOSE 7379 7380
# A PING answers NOAUTH without the password: enough to show it serves.
HEALTHCHECK --interval=10s --timeout=3s \
    CMD bash -c 'exec 3<>/dev/tcp/127.0.0.1/${SLUICE_PORT:-7379} && printf "PING\r\n" >&3 && read -r -t 2 line <&3 && [[ $line == -NOAUTH* || $line == +PONG* ]]'
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/sluice-entrypoint"]
