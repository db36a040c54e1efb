// SPDX-License-Identifier: MIT
#include "http/dashboard_routes.h"

#include <chrono>
#include <memory>
#include <string>

namespace servelab {

namespace {

using namespace std::chrono_literals;

// A viewer's batch interval: at most 20 messages a second, whatever the step rate.
constexpr auto kBatchInterval = 50ms;
// A comment line after this long without records, so a viewer that left is noticed by a failed write.
constexpr int kQuietBatchesPerPing = 20;

}  // namespace

void add_dashboard_routes(httplib::Server& http, Dashboard& dashboard, std::function<bool()> stopping) {
  http.Get("/dashboard", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = dashboard_html();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  http.Get("/dashboard/events", [&dashboard, stopping](const httplib::Request&, httplib::Response& res) {
    std::shared_ptr<Dashboard::Viewer> viewer = dashboard.connect();
    if (!viewer) {
      res.status = 503;
      res.set_content("the dashboard has as many viewers as it takes; close one and reload\n", "text/plain");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    auto quiet = std::make_shared<int>(0);
    res.set_chunked_content_provider(
        "text/event-stream",
        [viewer, stopping, quiet](std::size_t, httplib::DataSink& sink) {
          if (viewer->closed() || stopping()) {
            sink.done();
            return true;
          }
          std::string out = viewer->take(kBatchInterval);
          if (out.empty() && ++*quiet >= kQuietBatchesPerPing) out = ": ping\n\n";
          if (out.empty()) return true;
          *quiet = 0;
          // A failed write means the viewer left: returning false drops the connection, and the releaser disconnects.
          return sink.write(out.data(), out.size());
        },
        [&dashboard, viewer](bool) { dashboard.disconnect(viewer); });
  });
}

}  // namespace servelab
