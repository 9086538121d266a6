# Rails 6.1 oracle: a single-file Rails application whose routes are drawn from
# $ORACLE_ROUTES, served by WEBrick through Rack. Everything the differential
# suite compares (routing, (.:format), Rack::MethodOverride, the params parsers)
# is Rails' own code with Rails' defaults; this file only draws routes and echoes
# what the action sees.
ENV["RAILS_ENV"] ||= "production"

require "json"
require "logger"
require "action_controller/railtie"
require "rack/handler/webrick"

port = Integer(ENV.fetch("ORACLE_PORT"))
ROUTES = JSON.parse(File.read(ENV.fetch("ORACLE_ROUTES"))).fetch("routes")

# The keys Rails puts into path_parameters besides the captures: ours
# (route_name, from the route's defaults) and Rails' own.
NON_CAPTURE_KEYS = %w[controller action format route_name].freeze

class OracleApp < Rails::Application
  # What `rails new` generates: without it ActionController::Base has no
  # forgery protection to skip, and 5.x/6.x framework defaults are off.
  config.load_defaults 6.1
  config.root = __dir__
  config.eager_load = false
  config.secret_key_base = "effectgate-differential-oracle-not-a-secret"
  # Host authorization would answer 403 to 127.0.0.1:<port>; the oracle reads
  # every Host the suite sends.
  config.hosts.clear
  config.logger = Logger.new($stderr)
  config.log_level = :info
  # No public/ folder: framework errors (404 routing, 400 parse) are answered by
  # ActionDispatch::PublicExceptions with the bare status.
  config.consider_all_requests_local = false
end

OracleApp.initialize!

OracleApp.routes.draw do
  ROUTES.each do |r|
    # The gate's {name} captures one segment, as Rails' :name does.
    rails_path = r.fetch("path").gsub(/\{(\w+)\}/, ':\1')
    match rails_path, to: "oracle#act", via: r.fetch("method").downcase.to_sym,
                      defaults: { route_name: r.fetch("name") }
  end
end

class OracleController < ActionController::Base
  skip_forgery_protection

  def act
    pp = request.path_parameters.transform_keys(&:to_s)
    path = pp.except(*NON_CAPTURE_KEYS)
    # params merges query, request body (form, multipart or JSON) and the path
    # parameters, path last; the body is what the action reads minus the path.
    body = params.to_unsafe_h.except(*NON_CAPTURE_KEYS, *path.keys)
    render status: 201, json: {
      route: pp["route_name"],
      method: request.request_method,
      path: path,
      format: pp["format"],
      query: request.query_parameters,
      body: body,
    }
  end
end

Rack::Handler::WEBrick.run(
  OracleApp,
  Host: "127.0.0.1",
  Port: port,
  Logger: WEBrick::Log.new($stderr, WEBrick::BasicLog::WARN),
  AccessLog: [],
  # Called once the listening socket is bound and accepting.
  StartCallback: -> { $stdout.puts "ORACLE READY"; $stdout.flush },
)
