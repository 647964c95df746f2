// Starts GraphiQL from the options the server put in the page. It lives in its own file, not
// inline, so the page's Content-Security-Policy can allow scripts from this origin only.
(() => {
  var options = JSON.parse(document.getElementById('graphiql-options').textContent);
  var assets = document.currentScript.dataset.assets;
  // Monaco's editor workers come from this origin too.
  self.MonacoEnvironment = {
    globalAPI: false,
    getWorkerUrl: (_moduleId, label) => {
      var file = label === 'json' ? 'json.worker.bundle.js' : label === 'graphql' ? 'graphql.worker..bundle.js' : 'editor.worker.bundle.js';
      return assets + '/monacoeditorwork/' + file;
    },
  };
  YogaGraphiQL.renderYogaGraphiQL(document.getElementById('root'), options);
})();
