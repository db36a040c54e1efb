// SPDX-License-Identifier: MIT
/**
 * @file dashboard_routes.h
 * @brief The dashboard's two routes on the server's cpp-httplib instance
 *        (http/dashboard.h): GET /dashboard (the page) and GET /dashboard/events
 *        (the step records as server-sent events). Internal to engine/http.
 */
#pragma once

#include <functional>

#include <httplib.h>

#include "http/dashboard.h"

namespace servelab {

/**
 * @brief Registers GET /dashboard and GET /dashboard/events on @p http.
 * @param stopping true once the server is stopping: open streams end.
 */
void add_dashboard_routes(httplib::Server& http, Dashboard& dashboard, std::function<bool()> stopping);

}  // namespace servelab
