<?php
// Laravel 8 oracle: the router script of PHP's built-in server (as `php artisan
// serve` runs Laravel), so PHP's own form and multipart parsing fills $_POST.
// It does what Laravel's HTTP kernel does with a request, from Debian's
// php-laravel-framework: Request::capture() (method override enabled), the
// skeleton app's global input middleware, an Illuminate Router with one route
// per $ORACLE_ROUTES entry, and Laravel's exception handler for everything that
// does not reach the action.

require_once 'Illuminate/Container/autoload.php';
require_once 'Illuminate/Events/autoload.php';
require_once 'Illuminate/Http/autoload.php';
require_once 'Illuminate/Routing/autoload.php';
require_once 'Illuminate/Pipeline/autoload.php';
require_once 'Illuminate/Config/autoload.php';
require_once 'Symfony/Component/ErrorHandler/autoload.php';

// Debian ships no autoloader for Illuminate\Foundation; load its classes from
// the same tree (only the middleware and the exception handler are used).
spl_autoload_register(function ($class) {
    $prefix = 'Illuminate\\Foundation\\';
    if (strncmp($class, $prefix, strlen($prefix)) === 0) {
        $file = '/usr/share/php/Illuminate/Foundation/'
            . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require_once $file;
        }
    }
});
// The handler calls config(); its helpers resolve through Container::getInstance().
require_once 'Illuminate/Foundation/helpers.php';

use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Events\Dispatcher;
use Illuminate\Foundation\Exceptions\Handler;
use Illuminate\Foundation\Http\Middleware\ConvertEmptyStringsToNull;
use Illuminate\Foundation\Http\Middleware\TrimStrings;
use Illuminate\Http\JsonResponse;
use Illuminate\Http\Request;
use Illuminate\Pipeline\Pipeline;
use Illuminate\Routing\Router;
use Symfony\Component\HttpKernel\Exception\HttpExceptionInterface;

// The skeleton app's App\Http\Middleware\TrimStrings leaves passwords as sent.
class OracleTrimStrings extends TrimStrings
{
    protected $except = ['current_password', 'password', 'password_confirmation'];
}

// Laravel's handler with app.debug off, as in production. The one change:
// there is no view factory, so an HTTP exception is rendered by the handler's
// own fallback (Symfony's HtmlErrorRenderer) instead of resources/views/errors;
// status and headers are the handler's either way. Reporting (logging) is
// left out.
class OracleHandler extends Handler
{
    protected function renderHttpException(HttpExceptionInterface $e)
    {
        return $this->convertExceptionToResponse($e);
    }
}

$routes = json_decode(file_get_contents(getenv('ORACLE_ROUTES')), true)['routes'];

$app = new Container();
Container::setInstance($app);
$app->instance('config', new Config(['app' => ['debug' => false]]));
$events = new Dispatcher($app);
$router = new Router($events, $app);
$app->instance('router', $router);

foreach ($routes as $r) {
    $name = $r['name'];
    // The gate's {name} is Laravel's own capture syntax: one segment, [^/]++.
    $router->addRoute([$r['method']], $r['path'], function () use ($name, $app) {
        $request = $app->make('request');
        // PHP arrays cannot tell {} from []: an empty one is reported as the
        // protocol's empty object; a JSON list body stays a list.
        $obj = function ($a) { return $a === [] ? new stdClass() : $a; };
        return new JsonResponse([
            'route' => $name,
            'method' => $request->getMethod(),
            'path' => $obj($request->route()->parameters()),
            'query' => $obj($request->query()),
            // input(): the JSON or form body over the query, what $request->x reads.
            'body' => $obj($request->input()),
        ], 201);
    })->name($name);
}

// Kernel::handle: enableHttpMethodParameterOverride (capture() does it), then
// the global middleware, then the router; exceptions go to the handler.
$request = Request::capture();
$app->instance('request', $request);
try {
    $response = (new Pipeline($app))
        ->send($request)
        ->through([OracleTrimStrings::class, ConvertEmptyStringsToNull::class])
        ->then(function ($request) use ($router, $app) {
            $app->instance('request', $request);
            return $router->dispatch($request);
        });
} catch (Throwable $e) {
    file_put_contents('php://stderr', get_class($e) . ': ' . $e->getMessage() . "\n");
    $response = (new OracleHandler($app))->render($request, $e);
}
$response->send();
