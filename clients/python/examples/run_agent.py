"""Runs an agent by name with a JSON input over gRPC and follows the run to its end.

    clients/python/generate.sh generated
    PYTHONPATH=generated python3 clients/python/examples/run_agent.py <agent name> ['{"some": "input"}']

Settings come from the environment, as a service would take them:
AGENTPLANE_URL (http:// for cleartext HTTP/2, https:// for TLS), AGENTPLANE_TENANT,
AGENTPLANE_CLIENT_ID, AGENTPLANE_CLIENT_SECRET, and AGENTPLANE_ISSUER (its metadata
names the token endpoint; default AGENTPLANE_URL, the issuer of `agentplane dev`) or
AGENTPLANE_TOKEN_URL; optionally AGENTPLANE_AUDIENCE and AGENTPLANE_SCOPE.
Needs grpcio and protobuf (Debian: python3-grpcio, python3-protobuf).
"""

import base64
import collections
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import grpc
from google.protobuf import json_format, struct_pb2

# The package the stubs were generated under (generate.sh's second argument).
from agentplane_api.platform.v1 import platform_service_pb2 as api
from agentplane_api.platform.v1 import platform_service_pb2_grpc as api_grpc
from agentplane_api.platform.v1 import run_pb2

TENANT_METADATA = "x-platform-tenant"
ENDED = {run_pb2.RUN_STATUS_SUCCEEDED, run_pb2.RUN_STATUS_FAILED, run_pb2.RUN_STATUS_CANCELLED, run_pb2.RUN_STATUS_TIMED_OUT}


class TokenError(Exception):
    """The token endpoint could not be reached or refused the client."""


class ClientCredentials:
    """OAuth 2.0 client credentials (RFC 6749 section 4.4): one token at a time,
    replaced a minute before it expires (at most half its lifetime early)."""

    def __init__(self, client_id, client_secret, token_url=None, issuer=None, scope=None, audience=None, refresh_before=60):
        self._client_id, self._client_secret = client_id, client_secret
        self._token_url, self._issuer = token_url, issuer
        self._scope, self._audience, self._refresh_before = scope, audience, refresh_before
        self._token, self._refresh_at, self._expires_at = None, 0.0, 0.0
        self._lock = threading.Lock()

    def token(self):
        with self._lock:
            if self._token is None or time.time() >= self._refresh_at:
                try:
                    self._fetch()
                except Exception:
                    # The token endpoint failed while the token held is still good.
                    if self._token is None or time.time() >= self._expires_at:
                        raise
            return self._token

    def _fetch(self):
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        if self._audience:
            form["audience"] = self._audience
        # RFC 6749 section 2.3.1: each part form-encoded before base64.
        basic = base64.b64encode(f"{urllib.parse.quote(self._client_id, safe='')}:{urllib.parse.quote(self._client_secret, safe='')}".encode()).decode()
        request = urllib.request.Request(
            self._token_endpoint(),
            data=urllib.parse.urlencode(form).encode(),
            headers={"authorization": f"Basic {basic}", "content-type": "application/x-www-form-urlencoded", "accept": "application/json"},
        )
        sent_at = time.time()
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = json.load(response)
        except urllib.error.HTTPError as e:
            # RFC 6749 section 5.2: error and error_description, when the answer is JSON.
            try:
                answer = json.loads(e.read())
                reason = f"{answer['error']}: {answer.get('error_description', '')}"
            except (ValueError, KeyError, TypeError):
                reason = e.reason
            raise TokenError(f"token request to {request.full_url} failed (HTTP {e.code}): {reason}") from None
        except urllib.error.URLError as e:
            raise TokenError(f"token request to {request.full_url} failed: {e.reason}") from None
        lifetime = float(body["expires_in"])
        self._token = body["access_token"]
        self._expires_at = sent_at + lifetime
        self._refresh_at = self._expires_at - min(self._refresh_before, lifetime / 2)

    def _token_endpoint(self):
        if self._token_url:
            return self._token_url
        # RFC 8414 (well-known path before the issuer's path), then OpenID Connect discovery.
        issuer = urllib.parse.urlsplit(self._issuer)
        path = issuer.path.rstrip("/")
        origin = f"{issuer.scheme}://{issuer.netloc}"
        for url in (f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}{path}/.well-known/openid-configuration"):
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    metadata = json.load(response)
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    continue
                raise TokenError(f"authorization server metadata at {url}: HTTP {e.code}") from None
            except urllib.error.URLError as e:
                raise TokenError(f"authorization server metadata at {url}: {e.reason}") from None
            if metadata.get("issuer") != self._issuer:
                raise TokenError(f"{url} is the metadata of {metadata.get('issuer')}, not {self._issuer}")
            self._token_url = metadata["token_endpoint"]
            return self._token_url
        raise TokenError(f"no authorization server metadata for {self._issuer}")


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class AgentplaneMetadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds the bearer token and the tenant to every call; a call that names
    its own tenant (metadata x-platform-tenant) keeps it."""

    def __init__(self, tokens, tenant):
        self._tokens, self._tenant = tokens, tenant

    def _details(self, details):
        metadata = list(details.metadata or [])
        if not any(key == TENANT_METADATA for key, _ in metadata):
            metadata.append((TENANT_METADATA, self._tenant))
        metadata.append(("authorization", f"Bearer {self._tokens.token()}"))
        return _CallDetails(details.method, details.timeout, metadata, details.credentials, details.wait_for_ready, details.compression)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


def open_channel(url):
    """gRPC has no path prefix: agentplane must be at the root of its address."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        return grpc.secure_channel(parts.netloc, grpc.ssl_channel_credentials())
    # Cleartext HTTP/2 (h2c), which agentplane serves on its one port.
    return grpc.insecure_channel(parts.netloc)


def agent_named(stub, name):
    page_token = ""
    while True:
        page = stub.ListAgents(api.ListAgentsRequest(page_size=100, page_token=page_token), timeout=10)
        for agent in page.agents:
            if agent.name == name:
                return agent
        page_token = page.next_page_token
        if not page_token:
            return None


def main(argv):
    if len(argv) < 2:
        print("usage: run_agent.py <agent name> [input JSON]", file=sys.stderr)
        return 2
    name, text = argv[1], argv[2] if len(argv) > 2 else "{}"
    env = os.environ
    tokens = ClientCredentials(
        env["AGENTPLANE_CLIENT_ID"],
        env["AGENTPLANE_CLIENT_SECRET"],
        token_url=env.get("AGENTPLANE_TOKEN_URL"),
        issuer=env.get("AGENTPLANE_ISSUER", env["AGENTPLANE_URL"]),
        scope=env.get("AGENTPLANE_SCOPE"),
        audience=env.get("AGENTPLANE_AUDIENCE"),
    )
    channel = grpc.intercept_channel(open_channel(env["AGENTPLANE_URL"]), AgentplaneMetadata(tokens, env["AGENTPLANE_TENANT"]))
    stub = api_grpc.PlatformServiceStub(channel)
    try:
        agent = agent_named(stub, name)
        if agent is None:
            print(f'no agent named "{name}"', file=sys.stderr)
            return 1
        run_input = json_format.Parse(text, struct_pb2.Value())
        run = stub.RunAgent(api.RunAgentRequest(id=agent.id, input=run_input), timeout=10).run
        print(f"run {run.id} queued")
        # The run now, then on every change until it ends; the server ends a
        # quiet or long-lived stream OK (as when it shuts down): watch again.
        while run.status not in ENDED:
            for message in stub.WatchRun(api.WatchRunRequest(id=run.id)):
                run = message.run
    except TokenError as e:
        print(e, file=sys.stderr)
        return 1
    except grpc.RpcError as e:
        # A refused call says why, e.g. PERMISSION_DENIED when the client is
        # not a member of the tenant.
        print(f"{e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    finally:
        channel.close()
    status = run_pb2.RunStatus.Name(run.status).removeprefix("RUN_STATUS_").lower()
    if run.status != run_pb2.RUN_STATUS_SUCCEEDED:
        print(f"run {run.id} {status}: {run.error}")
        return 1
    output = json.dumps(json_format.MessageToDict(run.output), separators=(",", ":"))
    print(f"run {run.id} {status}: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
