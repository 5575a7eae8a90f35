package egress

// ProxyEnv returns the environment that points a box's tools at the proxy URL proxyURL
// (http://agentbox:<pairing>@127.0.0.1:<port>), sorted: HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and
// their lower-case forms (curl, git's libcurl, Go, Python), npm's own proxy settings
// (npm_config_proxy, npm_config_https_proxy), pip's (PIP_PROXY), and NO_PROXY for the in-box
// relay (127.0.0.1, localhost).
func ProxyEnv(proxyURL string) []string {
	const noProxy = "127.0.0.1,localhost,::1"
	return []string{
		"ALL_PROXY=" + proxyURL,
		"HTTPS_PROXY=" + proxyURL,
		"HTTP_PROXY=" + proxyURL,
		"NO_PROXY=" + noProxy,
		"PIP_PROXY=" + proxyURL,
		"PIP_RETRIES=1",
		"all_proxy=" + proxyURL,
		"http_proxy=" + proxyURL,
		"https_proxy=" + proxyURL,
		"no_proxy=" + noProxy,
		"npm_config_https_proxy=" + proxyURL,
		"npm_config_noproxy=" + noProxy,
		"npm_config_proxy=" + proxyURL,
	}
}
