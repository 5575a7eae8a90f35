package egress

// ProxyEnv returns the environment that points a box's tools at the proxy URL proxyURL
// (http://agentbox:<pairing>@127.0.0.1:<port>): HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and their
// lower-case forms, and NO_PROXY for the in-box relay (127.0.0.1, localhost), sorted.
func ProxyEnv(proxyURL string) []string {
	const noProxy = "127.0.0.1,localhost,::1"
	return []string{
		"ALL_PROXY=" + proxyURL,
		"HTTPS_PROXY=" + proxyURL,
		"HTTP_PROXY=" + proxyURL,
		"NO_PROXY=" + noProxy,
		"all_proxy=" + proxyURL,
		"http_proxy=" + proxyURL,
		"https_proxy=" + proxyURL,
		"no_proxy=" + noProxy,
	}
}
