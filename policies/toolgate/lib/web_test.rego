package toolgate.lib_test

import data.toolgate.fixtures_test as fixtures
import data.toolgate.lib

test_url_parts if {
	fixtures.same(lib.url_parts("HTTPS://user:pw@Example.COM.:8443/a/b?q=1#top"), {
		"scheme": "https", "userinfo": "user:pw", "host": "example.com", "port": "8443",
		"path": "/a/b", "query": "q=1", "fragment": "top",
	})
	fixtures.same(lib.url_host("http://[::1]:80/"), "[::1]")
	fixtures.same(lib.url_host("https://%65vil.com/"), "evil.com")
	fixtures.same(lib.url_host("https://bad%zz.com/"), "bad%zz.com")
}

# The host is where a browser goes: after the last "@", and "\" ends the authority.
test_url_host_tricks if {
	fixtures.same(lib.url_host("https://trusted.com@evil.com/"), "evil.com")
	fixtures.same(lib.url_host("https://a@trusted.com@evil.com/x"), "evil.com")
	fixtures.same(lib.url_host("https://evil.com\\@trusted.com/"), "evil.com")
	fixtures.same(lib.url_host("https://evil.com#@trusted.com"), "evil.com")
}

# A host typed without a scheme is still a host (a deny of internal hosts must see it).
test_url_host_without_a_scheme if {
	fixtures.same(lib.url_host("www.x.com"), "www.x.com")
	fixtures.same(lib.url_host("WWW.X.com./a?b=1"), "www.x.com")
	fixtures.same(lib.url_host("//evil.com/x"), "evil.com")
	fixtures.same(lib.url_host("10.0.0.5:8080/admin"), "10.0.0.5")
	fixtures.same(lib.url_host("trusted.com@evil.com/"), "evil.com")
	lib.host_is_internal(lib.url_host("169.254.169.254/latest/meta-data"))
	every u in ["/relative", "", " x.com", 42, "a\nb.com"] {
		not lib.url_host(u)
	}
}

test_url_parts_undefined_for_non_urls if {
	every u in ["example.com/a", "/relative", "mailto:a@b.c", "", 42, "http://a\nb.com/"] {
		not lib.url_parts(u)
	}
}

test_host_in_domains if {
	lib.host_in_domain("mail.example.com", "example.com")
	lib.host_in_domain("example.com", "Example.com.")
	not lib.host_in_domain("badexample.com", "example.com")
	lib.host_in_domains("a.b.example.org", ["x.com", "example.org"])
	not lib.host_in_domains("example.org", [1, "x.com"])
}

test_ip_hosts if {
	every h in ["127.0.0.1", "10.1.2.3", "169.254.169.254", "192.168.0.1", "[::1]", "[fe80::1]", "[::ffff:127.0.0.1]", "localhost", "api.localhost", "2130706433", "0x7f.1", "0177.0.0.1", "999.1.1.1"] {
		lib.host_is_internal(h)
	}
	every h in ["8.8.8.8", "[2001:db8::1]", "[2606:4700::1111]", "example.com", "10.example.com", "b\u00fccher.de"] {
		not lib.host_is_internal(h)
	}
	lib.host_is_ip("8.8.8.8")
	not lib.host_is_ip("example.com")
}

test_registrable_domain if {
	cases := {
		"www.example.com": "example.com",
		"a.b.example.co.uk": "example.co.uk",
		"example.co.uk": "example.co.uk",
		"user.github.io": "user.github.io",
		"x.y.bucket.s3.amazonaws.com": "bucket.s3.amazonaws.com",
		"shop.example.com.au": "example.com.au",
		"10.0.0.1": "10.0.0.1",
	}
	every host, want in cases {
		fixtures.same([host, lib.registrable_domain(host)], [host, want])
	}
	not lib.registrable_domain("co.uk")
	not lib.registrable_domain("localhost")
}

test_email_parts if {
	fixtures.same(lib.email_parts("Ann <ann.lee+x@Mail.Example.com>"), {"local": "ann.lee+x", "domain": "mail.example.com"})
	fixtures.same(lib.email_domain("bob@example.org"), "example.org")
	lib.email_in_domains("bob@mail.example.org", ["example.org"])
	not lib.email_in_domains("bob@example.org.evil.com", ["example.org"])
	every bad in ["bob", "bob@", "@x.com", "bob@x", "a b@x.com", "bob@-x.com", 7, "b\u00f6b@x.com"] {
		not lib.email_parts(bad)
	}
}

test_emails_and_links_in_text if {
	text := "Write to Ann@Example.com or see https://docs.example.com/a?b=1, www.other.org/x. Or (http://evil.io)!"
	fixtures.same(lib.emails_in(text), {"ann@example.com"})
	fixtures.same(lib.links_in(text), {"https://docs.example.com/a?b=1", "http://www.other.org/x", "http://evil.io"})
	fixtures.same(lib.link_hosts(text), {"docs.example.com", "www.other.org", "evil.io"})
	fixtures.same(lib.links_outside(text, ["example.com", "other.org"]), {"http://evil.io"})
	fixtures.same(lib.links_in("no links here"), set())
	not lib.links_in(42)
}

# A browser folds a host by UTS 46 before it reads an address, and an IPv6 literal may carry an
# IPv4 one: every such form of an internal host, and names only a private network resolves.
test_internal_host_forms if {
	every h in [
		"\uFF11\uFF12\uFF17.0.0.1", "\u2460\u2461\u2466.0.0.1", "127\u30020.0.1", "\uFF4Cocalhost",
		"\u00B2\u00B9.0.0.1", "[::127.0.0.1]", "[::ffff:8.8.8.8]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]",
		"[ff02::1]", "224.0.0.1", "255.255.255.255", "metadata.google.internal", "svc.cluster.local",
		"printer.home.arpa", "intranet",
	] {
		lib.host_is_internal(h)
	}
	lib.host_is_internal(lib.url_parts("http://\uFF11\uFF12\uFF17.0.0.1/").host)
}
