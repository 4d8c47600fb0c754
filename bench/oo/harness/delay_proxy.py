#!/usr/bin/env python3
"""A TCP proxy that delays every chunk by a fixed time in each direction, for
measuring a store in PostgreSQL behind network latency where the kernel has
no netem (this machine's has none). Order is kept and throughput is not
limited: each chunk is sent `delay` after it arrived.

    delay_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT ONE_WAY_DELAY_MS

Its own cost (Python, asyncio) is measured by running it with 0 ms."""
import asyncio
import sys


async def pipe(reader, writer, delay):
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            if delay:
                loop.call_later(delay, writer.write, data)
            else:
                writer.write(data)
    finally:
        await asyncio.sleep(delay)
        writer.close()


async def main():
    listen, host, port, delay = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]) / 1000

    async def serve(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_connection(host, port)
        await asyncio.gather(pipe(client_reader, server_writer, delay), pipe(server_reader, client_writer, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(serve, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


asyncio.run(main())
